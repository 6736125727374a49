-- fleet.lua - the leases of one machine, renewed in one atomic call (docs/design.md,
-- "Across machines").  Runs inside Redis, on Redis's clock (TIME): no machine's
-- clock is ever read.  Everything a machine reports is checked, and what it is
-- granted never lets the fleet's grants in effect exceed the limit.
--
-- KEYS[1]      the fleet's epoch: when its state began (absent: Redis came back
--              empty, or this is the first call)
-- KEYS[1 + i]  item i's hash: a section, or one key of a keyed section
-- KEYS[1 + n + i]  item i's pause key (its hash's name with ':pause'); a caller
--              that does not give it has it derived.  Every key the script
--              touches is declared, so a Cluster moving the fleet's slot routes
--              the call as a whole (ASK, TRYAGAIN) instead of failing it.
-- ARGV[1]      this machine's name         ARGV[2]  lease time to live (ms)
-- ARGV[3]      settling time after an empty start (ms)
-- ARGV[4]      the part of a rate that may be granted, per million (headroom for the
--              machines' own bursts)
-- ARGV[5]      how many items; then six fields each:
--   kind     r rate | c places | f fixed window | s session window | l sliding window
--   limit    r: the rate in thousandths per window; c: places; windows: AMOUNT
--   window   the window (ms)
--   demand   r: thousandths per window this machine would use; c: places it would
--            hold; windows: how many it would send before its next call
--   held     r, c: what it enforces now (thousandths per window, places)
--   pause    when a pause the destination asked of this machine ends (Redis ms;
--            0: none): kept for the item as the latest such end, for every machine
--
-- When a machine is granted less than its fair part because others still hold
-- the rest, the script publishes its name on the fleet's wake channel (the epoch
-- key's name with ':wake' for ':epoch'): the others call at once and learn their
-- smaller shares, rather than at their next period.
--
-- Returns {now_ms, settling, then five values per item}: the grant (r: thousandths
-- per window; c: places; windows: the machine's count in the chunk), the machines
-- live for the item, for windows the window's number and its end (ms), and the
-- end of the item's pause (ms; 0: none) - each machine pauses until then too.

local now
do
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local me, ttl, settle, ppm = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = tonumber(ARGV[5])
if not me or not ttl or not settle or not ppm or not n or n < 0 or #ARGV < 5 + 6 * n then
	return redis.error_reply('fleet: bad arguments')
end

local settling = 0
local short = false
local epoch = tonumber(redis.call('GET', KEYS[1]))
if not epoch then
	-- Redis came back empty (or this is the fleet's first call): the machines'
	-- holdings are not known yet.  For a settling time nobody is granted more than
	-- it reports holding, so every live machine reports first.
	redis.call('SET', KEYS[1], now)
	epoch = now
end
if now - epoch < settle then
	settling = 1
end
redis.call('PEXPIRE', KEYS[1], math.max(ttl * 100, 86400000))

local function num(x)
	local v = tonumber(x)
	if v == nil or v ~= v or v < 0 then
		return 0
	end
	return math.floor(v)
end

-- Fair shares of `budget` over the demands: a machine asking less than its equal
-- part gets what it asks, the rest is split among the others; what nobody asks
-- for is split among all, so a rising demand has room at once.
local function fair(budget, demands, count)
	local target, left, open = {}, budget, count
	local order = {}
	for m, d in pairs(demands) do
		order[#order + 1] = m
	end
	table.sort(order, function(a, b)
		return demands[a] < demands[b]
	end)
	for _, m in ipairs(order) do
		local part = math.floor(left / open)
		local give = math.min(demands[m], part)
		target[m] = give
		left = left - give
		open = open - 1
	end
	if count > 0 and left > 0 then
		local extra = math.floor(left / count)
		for m, _ in pairs(target) do
			target[m] = target[m] + extra
		end
	end
	return target
end

-- A share of a rate, or of places.  Each machine's entry: held:grant:expires:demand.
local function share(key, limit, demand, held, integral)
	local entries = redis.call('HGETALL', key)
	local live, demands, count = {}, {}, 0
	for i = 1, #entries, 2 do
		local m = entries[i]
		local h, g, exp, d = string.match(entries[i + 1], '^(%d+):(%d+):(%d+):(%d+)$')
		if h == nil or num(exp) < now then
			redis.call('HDEL', key, m)
		elseif m ~= me then
			live[m] = {held = num(h), grant = num(g)}
			demands[m] = num(d)
			count = count + 1
		end
	end
	demands[me] = demand
	count = count + 1
	local budget = limit
	if not integral then
		budget = math.floor(limit * ppm / 1000000)
	end
	local target = fair(budget, demands, count)
	-- What the others may be using until they hear again: the larger of what they
	-- last reported and what they were last granted.
	local others = 0
	for _, e in pairs(live) do
		others = others + math.max(e.held, e.grant)
	end
	local grant = math.max(0, math.min(target[me], budget - others))
	-- Short by more than rounding (a hundredth of a rate): the others are told.
	local slack = 0
	if not integral then
		slack = math.floor(budget / 100)
	end
	if grant + slack < target[me] and grant < demand then
		short = true
	end
	if settling == 1 then
		grant = math.min(grant, held)
	end
	redis.call('HSET', key, me, held .. ':' .. grant .. ':' .. (now + ttl) .. ':' .. demand)
	redis.call('PEXPIRE', key, ttl * 4)
	return grant, count
end

-- A chunk of a window's AMOUNT.  Fixed windows are numbered on Redis's clock; a
-- session window starts at the first chunk asked for; a sliding window counts each
-- chunk in the bucket of the end of its use, for a window after it.
local function chunk(key, kind, amount, window, want)
	local mine = 'm:' .. me
	local id, stop
	if kind == 'f' then
		id = math.floor(now / window)
		stop = (id + 1) * window
	elseif kind == 's' then
		local start = num(redis.call('HGET', key, 'start'))
		if start == 0 or now >= start + window then
			if want == 0 then
				return 0, 0, 0, 0
			end
			start = now
			redis.call('DEL', key)
			redis.call('HSET', key, 'start', start)
		end
		id = start
		stop = start + window
	else
		-- Sliding: buckets of a 64th of the window; a chunk is used for one lease
		-- time and counted, in the bucket that time ends in, for a window after.
		local width = math.max(1, math.floor(window / 64))
		stop = now + ttl
		local id = math.floor(stop / width)
		local used = 0
		local fields = redis.call('HGETALL', key)
		for i = 1, #fields, 2 do
			local b = tonumber(string.match(fields[i], '^b:(%d+)$'))
			if b ~= nil then
				if (b + 1) * width + window <= now then
					redis.call('HDEL', key, fields[i])
				else
					used = used + num(fields[i + 1])
				end
			end
		end
		local give = math.max(0, math.min(want, amount - used))
		if settling == 1 then
			give = 0
		end
		if give > 0 then
			redis.call('HINCRBY', key, 'b:' .. id, give)
		end
		redis.call('PEXPIRE', key, window + ttl * 4)
		-- Each call's chunk is a new one (numbered by this instant), used alone.
		return give, 0, now, stop
	end
	if num(redis.call('HGET', key, 'win')) ~= id then
		redis.call('DEL', key)
		redis.call('HSET', key, 'win', id, 'used', 0)
	end
	local used = num(redis.call('HGET', key, 'used'))
	local had = num(redis.call('HGET', key, mine))
	local give = math.max(0, math.min(want, amount - used))
	if settling == 1 then
		give = 0
	end
	if give > 0 then
		redis.call('HINCRBY', key, 'used', give)
		redis.call('HINCRBY', key, mine, give)
	end
	redis.call('PEXPIRE', key, window + ttl * 4)
	return had + give, 0, id, stop
end

-- The latest end of a pause any machine reported for item `key` (0: none); a
-- later one than kept is kept, until it ends.  At most 400 days ahead.
local function paused(key, pkey, pause)
	pkey = pkey or (key .. ':pause')
	local kept = num(redis.call('GET', pkey))
	if pause > now and pause > kept and pause - now <= 34560000000 then
		redis.call('SET', pkey, pause, 'PX', pause - now)
		kept = pause
	end
	if kept <= now then
		return 0
	end
	return kept
end

local out = {now, settling}
for i = 1, n do
	local base = 5 + (i - 1) * 6
	local kind = ARGV[base + 1]
	local limit, window = num(ARGV[base + 2]), num(ARGV[base + 3])
	local demand, held = num(ARGV[base + 4]), num(ARGV[base + 5])
	local key = KEYS[1 + i]
	local g, count, id, stop = 0, 0, 0, 0
	if key == nil or window == 0 then
		g = 0
	elseif kind == 'r' or kind == 'c' then
		g, count = share(key, limit, demand, held, kind == 'c')
	elseif kind == 'f' or kind == 's' or kind == 'l' then
		g, count, id, stop = chunk(key, kind, limit, window, demand)
	end
	out[#out + 1] = g
	out[#out + 1] = count
	out[#out + 1] = id
	out[#out + 1] = stop
	if key == nil then
		out[#out + 1] = 0
	else
		out[#out + 1] = paused(key, KEYS[1 + n + i], num(ARGV[base + 6]))
	end
end
if short then
	redis.call('PUBLISH', (string.gsub(KEYS[1], ':epoch$', ':wake')), me)
end
return out

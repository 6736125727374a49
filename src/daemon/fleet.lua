-- fleet.lua - the leases of one machine, renewed in one atomic call (docs/design.md,
-- "Across machines").  Runs inside Redis, on Redis's clock (TIME): no machine's
-- clock is ever read.  Everything a machine reports is checked, and what it is
-- granted never lets the fleet's grants in effect exceed the limit.
--
-- KEYS[1]      the fleet's epoch: when its state began (absent: Redis came back
--              empty, or this is the first call)
-- KEYS[1 + i]  item i's hash: a section, or one key of a keyed section
-- KEYS[1 + n + i]  item i's pause key (its hash's name with ':pause')
-- KEYS[1 + 2n + i] item i's expiry set (its hash's name with ':exp')
-- KEYS[1 + 3n + i] item i's totals (its hash's name with ':totals')
-- KEYS[1 + 4n + i] item i's grid (its hash's name with ':grid'): which ranks of
--              the fleet's slot grid are taken (below, "The grid")
--              A caller that does not give these has them derived.  Every key
--              the script touches is declared, so a Cluster moving the fleet's
--              slot routes the call as a whole (ASK, TRYAGAIN) instead of
--              failing it.
-- ARGV[1]      this machine's name         ARGV[2]  lease time to live (ms)
-- ARGV[3]      settling time after an empty start (ms)
-- ARGV[4]      the part of a rate that may be granted, per million (headroom for the
--              machines' own bursts)
-- ARGV[5]      how many items; then seven fields each:
--   kind     r rate | g rate on the grid | c places | f fixed window | s session window |
--            l sliding window
--   limit    r: the rate in thousandths per window; c: places; windows: AMOUNT
--   window   the window (ms)
--   demand   r: thousandths per window this machine would use; c: places it would
--            hold; windows: how many it would send before its next call
--   held     r, c: what it enforces now (thousandths per window, places)
--   pause    when a pause the destination asked of this machine ends (Redis ms;
--            0: none): kept for the item as the latest such end, for every machine
--   runs     g: the runs of ranks its lease holds, "from-to" joined by '.' ('-': none)
--
--   kind q is a rate on the grid served by claims (below, "Claims"): the machine
--   is granted its fair part but no ranks; its requests claim free slots one by one.
--
-- A claim call (ARGV[5] = 'claim') reserves slots of free ranks for one item:
-- KEYS[1] the epoch, KEYS[2] the item's grid, KEYS[3] its claimed ranks (a sorted
-- set), KEYS[4] its claim cursor; ARGV[6] the grid's interval (ns), ARGV[7] how
-- many slots, ARGV[8] the lead (us): no slot starts sooner than that after now.
-- Returns {now_us, k...}: the slots' numbers (slot k starts at k intervals of
-- Redis's time).
--
-- When a machine is granted less than its fair part because others still hold
-- the rest, the script publishes its name on the fleet's wake channel (the epoch
-- key's name with ':wake' for ':epoch'): the others call at once and learn their
-- smaller shares, rather than at their next period.
--
-- Returns {now_ms, settling, now_us, then 21 values per item}: the grant (r,
-- g: thousandths per window; c: places; windows: the machine's count in the
-- chunk), the machines live for the item, for windows the window's number and its
-- end (ms), the end of the item's pause (ms; 0: none) - each machine pauses until
-- then too - and for g the runs of ranks granted, from * 8192 + to (0: none).

local now, now_us
do
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local me, ttl, settle, ppm = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local claim_call = ARGV[5] == 'claim'
local n = claim_call and 0 or tonumber(ARGV[5])
local FIELDS = 7 -- per item in ARGV, its kind included
if not me or not ttl or not settle or not ppm or not n or n < 0 or #ARGV < 5 + FIELDS * n then
	return redis.error_reply('fleet: bad arguments')
end

local settling = 0
local short = false
local epoch = tonumber(redis.call('GET', KEYS[1]))
if not epoch and claim_call then
	-- Redis came back empty: machines may still hold ranks nobody knows of yet;
	-- claims wait for the settling that a lease call starts.
	return {now, 1, now_us}
end
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

-- Rate and place items keep running totals, so that a call costs the same
-- whatever the fleet's size (docs/design.md, "At size").  Beside its pause key,
-- an item has three keys:
--   its hash     machine -> "held:grant:expires:demand", and the field '#v' (a
--                machine's name never starts with '#'), set while the totals
--                below are those of the entries.  An older script deletes fields
--                it cannot read, '#v' among them: the totals are then rebuilt
--                once from the entries;
--   ':exp'       each entry's expiry as its score, so expired entries are found
--                without walking the others;
--   ':totals'    n entries, u the sum of max(held, grant), d the sum of demands,
--                and per demand bucket k (DEMAND_STEPS to a doubling) 'c:k' and
--                's:k' its count and the sum of its demands; and the water level
--                last computed from them (below).
-- Invariant: n, u, d and the buckets are exactly those of the entries in the hash.
local DEMAND_STEPS = 16
local SWEEP_MAX = 64 -- expired entries taken out per call, at most
local LEVEL_MS = 100 -- how long a water level computed from the buckets is used

local function int(x)
	return string.format('%d', x)
end

local function bucket(d)
	if d < 1 then
		return 0
	end
	return 1 + math.floor(DEMAND_STEPS * math.log(d) / math.log(2))
end

-- The grid (docs/design.md, "The grid").  A rate counting requests is released
-- on one grid of slots, slot k starting at k intervals of Redis's time, and slot
-- k belongs to whoever holds rank bitrev12(k mod 4096).  A machine is granted
-- runs of ranks, at most GRID_RUNS of them, that no other machine holds: the
-- item's grid key is a string of GRID_RANKS bytes, 1 where a rank is taken.  A
-- machine's entry keeps every rank it may be using - those it reports holding
-- and those it was last granted - and only ranks in no entry are free: a rank
-- taken away is given to another only after its holder has reported no longer
-- holding it, or its entry expired (as a smaller share is counted at its old
-- size until reported).  So no two machines' leases ever hold the same rank,
-- and no slot is released twice by the fleet.
local GRID_RANKS, GRID_RUNS = 4096, 16

-- Runs of ranks: sorted, disjoint, not touching; each {from, to}.
local function runs_norm(r)
	table.sort(r, function(x, y) return x[1] < y[1] end)
	local out = {}
	for _, x in ipairs(r) do
		if x[1] < x[2] then
			local last = out[#out]
			if last ~= nil and x[1] <= last[2] then
				if x[2] > last[2] then
					last[2] = x[2]
				end
			else
				out[#out + 1] = {x[1], x[2]}
			end
		end
	end
	return out
end

local function runs_parse(s)
	local r = {}
	if type(s) ~= 'string' then
		return r
	end
	for a, b in string.gmatch(s, '(%d+)%-(%d+)') do
		a, b = tonumber(a), tonumber(b)
		if a ~= nil and b ~= nil and a < b and b <= GRID_RANKS and #r < 64 then
			r[#r + 1] = {a, b}
		end
	end
	return runs_norm(r)
end

local function runs_string(r)
	local parts = {}
	for _, x in ipairs(r) do
		parts[#parts + 1] = int(x[1]) .. '-' .. int(x[2])
	end
	return table.concat(parts, '.')
end

local function runs_size(r)
	local n = 0
	for _, x in ipairs(r) do
		n = n + x[2] - x[1]
	end
	return n
end

-- a less b.
local function runs_diff(a, b)
	local out = {}
	for _, x in ipairs(a) do
		local from = x[1]
		for _, y in ipairs(b) do
			if y[2] > from and y[1] < x[2] then
				if y[1] > from then
					out[#out + 1] = {from, y[1]}
				end
				from = math.max(from, y[2])
			end
		end
		if from < x[2] then
			out[#out + 1] = {from, x[2]}
		end
	end
	return runs_norm(out)
end

local function runs_union(a, b)
	local all = {}
	for _, x in ipairs(a) do
		all[#all + 1] = {x[1], x[2]}
	end
	for _, x in ipairs(b) do
		all[#all + 1] = {x[1], x[2]}
	end
	return runs_norm(all)
end

local function parse_entry(v)
	if v == nil or v == false then
		return nil
	end
	local h, g, exp, d, r = string.match(v, '^(%d+):(%d+):(%d+):(%d+):?([%d%.%-]*)$')
	if h == nil then
		return nil
	end
	return {held = num(h), grant = num(g), exp = num(exp), demand = num(d), runs = runs_parse(r)}
end

-- An item's grid: its bytes (read once a call, kept in step with every write).
local grids = {}

local function grid_get(gkey)
	if grids[gkey] == nil then
		local v = redis.call('GET', gkey)
		if type(v) ~= 'string' or #v ~= GRID_RANKS then
			v = string.rep('\0', GRID_RANKS)
		end
		grids[gkey] = v
	end
	return grids[gkey]
end

-- Mark runs r taken (1) or free (0).
local function grid_set(gkey, r, taken)
	local v = grid_get(gkey)
	local c = taken and '\1' or '\0'
	for _, x in ipairs(r) do
		local fill = string.rep(c, x[2] - x[1])
		redis.call('SETRANGE', gkey, x[1], fill)
		v = string.sub(v, 1, x[1]) .. fill .. string.sub(v, x[2] + 1)
	end
	grids[gkey] = v
end

-- The free parts of runs r.
local function grid_free_parts(gkey, r)
	local v, out = grid_get(gkey), {}
	for _, x in ipairs(r) do
		local at = x[1] + 1 -- rank i is byte i + 1
		while at <= x[2] do
			local s, e = string.find(v, '%z+', at)
			if s == nil or s > x[2] then
				break
			end
			out[#out + 1] = {s - 1, math.min(e, x[2])}
			at = e + 1
		end
	end
	return out
end

-- Quarantine.  An entry that expired may belong to a machine that still uses
-- its ranks: a daemon that took an overloaded Redis's refused or reset
-- connections for an outage shapes on at its last lease ("Outage"), and 200
-- such daemons handed on ranks their holders still used put 120 and 133 in a
-- second of 100/s.  So an expired entry's ranks stay taken for QUARANTINE_LIVES
-- lease lives after it is found gone (one: a daemon refused reconnects after
-- 100 ms, and a dead daemon's share waits that much longer), kept in the item's hash under '#q'
-- ("name|until|runs;..."), and only then are free; the machine itself, calling
-- again meanwhile, has them back as its own.
local QUARANTINE_LIVES, QUARANTINE_MAX = 1, 256

local function quarantine_read(key)
	local q = {}
	local v = redis.call('HGET', key, '#q')
	if type(v) == 'string' then
		for m, u, r in string.gmatch(v, '([^|;]+)|(%d+)|([^;]*)') do
			if #q < QUARANTINE_MAX then
				q[#q + 1] = {m = m, ['until'] = tonumber(u), runs = runs_parse(r)}
			end
		end
	end
	return q
end

local function quarantine_write(key, q)
	if #q == 0 then
		redis.call('HDEL', key, '#q')
		return
	end
	local parts = {}
	for _, x in ipairs(q) do
		parts[#parts + 1] = x.m .. '|' .. int(x['until']) .. '|' .. runs_string(x.runs)
	end
	redis.call('HSET', key, '#q', table.concat(parts, ';'))
end

-- Runs whose quarantine is over are freed on gkey (those still in another's
-- entry or quarantine cannot be: a rank is in one of them at most); returns
-- what is still quarantined.
local function quarantine_expire(key, gkey, q)
	local kept, changed = {}, false
	for _, x in ipairs(q) do
		if x['until'] <= now then
			if gkey ~= nil then
				grid_set(gkey, x.runs, false)
			end
			changed = true
		else
			kept[#kept + 1] = x
		end
	end
	if changed then
		quarantine_write(key, kept)
	end
	return kept
end

-- Claims (docs/design.md, "Claims").  A machine whose demand is a few requests
-- a round holds no ranks (kind q): each of its requests claims one slot of a
-- free rank, the next such slot at least a lead after now, in one call.  A rank
-- with a claim ahead is marked 2 in the grid ("claimed"), so no machine is
-- granted it (only 0 is free to grid_take) while another claim may still pick
-- it; the item's claimed set holds each such rank scored by when its last
-- claimed slot ends (Redis ms), and once that has passed it is free again.  A
-- claimed slot is released by one machine, once, within an interval of its
-- start, as its own slots are: the fleet's bound is the grid's.
local CLAIM_WALK = 2 * GRID_RANKS -- slots looked at by one claim call, at most

local function bitrev12(x)
	local r = 0
	for _ = 1, 12 do
		r = r * 2 + x % 2
		x = math.floor(x / 2)
	end
	return r
end

-- Ranks whose claims have all ended are free again (2 -> 0).
local function claims_sweep(gkey, ckey)
	local done = redis.call('ZRANGEBYSCORE', ckey, '-inf', '(' .. now)
	if #done == 0 then
		return
	end
	local v = grid_get(gkey)
	for _, r in ipairs(done) do
		r = tonumber(r)
		if r ~= nil and r >= 0 and r < GRID_RANKS and string.byte(v, r + 1) == 2 then
			redis.call('SETRANGE', gkey, r, '\0')
			v = string.sub(v, 1, r) .. '\0' .. string.sub(v, r + 2)
		end
	end
	grids[gkey] = v
	redis.call('ZREMRANGEBYSCORE', ckey, '-inf', '(' .. now)
end

-- Runs longest first (the order a machine keeps and takes them in: a machine
-- keeps its longest runs and gives up its shortest, and takes the longest free
-- ones, so the frame does not crumble into pieces no machine can use within
-- GRID_RUNS runs).
local function longest_first(r)
	local c = {}
	for _, x in ipairs(r) do
		c[#c + 1] = {x[1], x[2]}
	end
	table.sort(c, function(x, y)
		if x[2] - x[1] ~= y[2] - y[1] then
			return x[2] - x[1] > y[2] - y[1]
		end
		return x[1] < y[1]
	end)
	return c
end

-- Up to `want` ranks for a machine that may use `own` (its entry's), preferring
-- those it holds now (`held`), then the rest of its own, then free ranks next to
-- what it has, then the longest free runs: at most GRID_RUNS runs in all.  The
-- free ranks taken are marked.
local function grid_take(gkey, held, own, want)
	local out, need = {}, want
	local function add(from, to)
		local k = math.min(need, to - from)
		if k > 0 then
			out[#out + 1] = {from, from + k}
			need = need - k
		end
	end
	for _, x in ipairs(longest_first(held)) do
		add(x[1], x[2])
	end
	for _, x in ipairs(longest_first(runs_diff(own, held))) do
		add(x[1], x[2])
	end
	out = runs_norm(out)
	while #out > GRID_RUNS do
		-- The shortest run goes (its ranks stay the machine's until reported).
		local short = 1
		for i, x in ipairs(out) do
			if x[2] - x[1] < out[short][2] - out[short][1] then
				short = i
			end
		end
		need = need + out[short][2] - out[short][1]
		table.remove(out, short)
	end
	if need > 0 then
		local v, got = grid_get(gkey), {}
		for _, x in ipairs(out) do
			if need <= 0 then
				break
			end
			if x[2] < GRID_RANKS and string.byte(v, x[2] + 1) == 0 then
				local stop = (string.find(v, '[^%z]', x[2] + 1) or GRID_RANKS + 1) - 1
				local k = math.min(need, stop - x[2])
				got[#got + 1] = {x[2], x[2] + k}
				need = need - k
			end
		end
		local free, at = {}, 1
		while true do
			local s, e = string.find(v, '%z+', at)
			if s == nil then
				break
			end
			free[#free + 1] = {s - 1, e}
			at = e + 1
		end
		free = runs_diff(free, got) -- not what an extension just took
		for _, x in ipairs(longest_first(free)) do
			if need <= 0 or #out + #got >= GRID_RUNS then
				break
			end
			local k = math.min(need, x[2] - x[1])
			got[#got + 1] = {x[1], x[1] + k}
			need = need - k
		end
		grid_set(gkey, runs_norm(got), true)
		out = runs_norm(runs_union(out, got))
	end
	return out
end

-- Add (sign 1) or take out (sign -1) one entry's part of the totals t (kept in
-- step in tkey unless `only_here`).
local function count_in(t, tkey, e, sign, only_here)
	local k = bucket(e.demand)
	local u = math.max(e.held, e.grant)
	t.n = t.n + sign
	t.u = t.u + sign * u
	t.d = t.d + sign * e.demand
	if only_here then
		t.b[k] = t.b[k] or {c = 0, s = 0}
		t.b[k].c = t.b[k].c + sign
		t.b[k].s = t.b[k].s + sign * e.demand
		return
	end
	redis.call('HINCRBY', tkey, 'n', sign)
	redis.call('HINCRBY', tkey, 'u', int(sign * u))
	redis.call('HINCRBY', tkey, 'd', int(sign * e.demand))
	if redis.call('HINCRBY', tkey, 'c:' .. k, sign) <= 0 then
		redis.call('HDEL', tkey, 'c:' .. k, 's:' .. k)
	else
		redis.call('HINCRBY', tkey, 's:' .. k, int(sign * e.demand))
	end
end

-- The totals rebuilt from every entry (expired ones deleted): once, after an
-- older script, a key of the three gone, or totals that do not add up.
local function rebuild(key, ekey, tkey, gkey)
	local t = {n = 0, u = 0, d = 0, b = {}}
	redis.call('DEL', ekey, tkey)
	local taken = {}
	local entries = redis.call('HGETALL', key)
	for i = 1, #entries, 2 do
		local m = entries[i]
		if string.sub(m, 1, 1) ~= '#' then
			local e = parse_entry(entries[i + 1])
			if e == nil or e.exp < now then
				redis.call('HDEL', key, m)
			else
				count_in(t, tkey, e, 1, true)
				redis.call('ZADD', ekey, e.exp, m)
				for _, x in ipairs(e.runs) do
					taken[#taken + 1] = x
				end
			end
		end
	end
	if gkey ~= nil then
		-- Every entry's ranks taken again (two entries holding one rank can come
		-- only from a scribble: both keep it until one reports otherwise).
		for _, x in ipairs(quarantine_read(key)) do
			for _, y in ipairs(x.runs) do
				taken[#taken + 1] = y
			end
		end
		redis.call('SET', gkey, string.rep('\0', GRID_RANKS))
		grids[gkey] = nil
		grid_set(gkey, runs_norm(taken), true)
		-- Ranks with claims still ahead stay claimed.
		for _, r in ipairs(redis.call('ZRANGEBYSCORE', gkey .. ':claimed', now, '+inf')) do
			r = tonumber(r)
			if r ~= nil and r >= 0 and r < GRID_RANKS and string.byte(grid_get(gkey), r + 1) == 0 then
				grid_set(gkey, {{r, r + 1}}, true)
				redis.call('SETRANGE', gkey, r, '\2')
				grids[gkey] = nil
			end
		end
	end
	local fields = {'n', int(t.n), 'u', int(t.u), 'd', int(t.d)}
	for k, b in pairs(t.b) do
		if b.c > 0 then
			fields[#fields + 1] = 'c:' .. k
			fields[#fields + 1] = int(b.c)
			fields[#fields + 1] = 's:' .. k
			fields[#fields + 1] = int(b.s)
		end
	end
	redis.call('HSET', tkey, unpack(fields))
	redis.call('HSET', key, '#v', 1)
	return t
end

-- The totals (n, u, d, and the cached level), with up to SWEEP_MAX expired
-- entries taken out.
local function totals(key, ekey, tkey, gkey, sweep_gkey)
	local v = redis.call('HMGET', tkey, 'n', 'u', 'd', 'level', 'level_at', 'level_budget', 'level_n')
	local t = {n = tonumber(v[1]), u = tonumber(v[2]), d = tonumber(v[3]), level = tonumber(v[4]),
		level_at = tonumber(v[5]), level_budget = tonumber(v[6]), level_n = tonumber(v[7])}
	if redis.call('HEXISTS', key, '#v') == 0 or t.n == nil or t.u == nil or t.d == nil or t.n < 0 or t.u < 0 or
		t.d < 0 or (t.n > 0 and redis.call('EXISTS', ekey) == 0) or
		(gkey ~= nil and redis.call('STRLEN', gkey) ~= GRID_RANKS) then
		return rebuild(key, ekey, tkey, gkey)
	end
	local g = gkey or sweep_gkey
	local q = quarantine_expire(key, g, quarantine_read(key))
	local gone = redis.call('ZRANGEBYSCORE', ekey, '-inf', '(' .. now, 'LIMIT', 0, SWEEP_MAX)
	for _, m in ipairs(gone) do
		local e = parse_entry(redis.call('HGET', key, m))
		if e ~= nil then
			count_in(t, tkey, e, -1)
			-- Its ranks, whatever kind of call finds it expired, stay taken for the
			-- quarantine (the oldest one ends at once when there are too many).
			if g ~= nil and #e.runs > 0 then
				if #q >= QUARANTINE_MAX then
					grid_set(g, q[1].runs, false)
					table.remove(q, 1)
				end
				q[#q + 1] = {m = m, ['until'] = now + QUARANTINE_LIVES * ttl, runs = e.runs}
			end
		end
		redis.call('HDEL', key, m)
		redis.call('ZREM', ekey, m)
	end
	if #gone > 0 then
		quarantine_write(key, q)
	end
	if t.n < 0 or t.u < 0 or t.d < 0 then
		return rebuild(key, ekey, tkey, gkey)
	end
	return t
end

-- The water level of `budget` over the demand buckets: a bucket whose machines
-- ask on average no more than an equal part of what is left gets what it asks;
-- the level is then an equal part of the rest.  Demands within a bucket differ
-- by at most 4.4%; where the level falls inside a bucket, its machines asking
-- less than the level are counted as if they asked for it, so the level may be
-- low by that much for them.  Computed again after LEVEL_MS, or when the number
-- of machines or the budget changed (it walks the buckets, a few hundred at
-- most, never the machines); the grant's bound on the budget does not depend on
-- it.
local function level(t, tkey, budget, demand)
	if t.level ~= nil and t.level_budget == budget and t.level_n == t.n + 1 and t.level_at ~= nil and
		now - t.level_at < LEVEL_MS and now >= t.level_at then
		return t.level
	end
	local f = redis.call('HGETALL', tkey)
	local b, order = {}, {}
	for i = 1, #f, 2 do
		local kind, k = string.match(f[i], '^([cs]):(%d+)$')
		if kind ~= nil then
			k = tonumber(k)
			if b[k] == nil then
				b[k] = {c = 0, s = 0}
				order[#order + 1] = k
			end
			b[k][kind] = tonumber(f[i + 1]) or 0
		end
	end
	-- The caller, its old entry taken out, counted at the demand it reports now.
	local mine = bucket(demand)
	if b[mine] == nil then
		b[mine] = {c = 0, s = 0}
		order[#order + 1] = mine
	end
	b[mine].c = b[mine].c + 1
	b[mine].s = b[mine].s + demand
	table.sort(order)
	local left, open, lv = budget, t.n + 1, budget
	for _, k in ipairs(order) do
		if open <= 0 then
			break
		end
		if b[k].s > b[k].c * (left / open) then
			lv = math.floor(left / open)
			break
		end
		left = left - b[k].s
		open = open - b[k].c
	end
	redis.call('HSET', tkey, 'level', int(lv), 'level_at', int(now), 'level_budget', int(budget), 'level_n',
		int(t.n + 1))
	return lv
end

-- A share of a rate, or of places; on the grid (gkey given), as runs of ranks too.
-- A rate off the grid names its item's grid (sweep_gkey) only so that ranks an
-- entry held are freed whoever finds it gone: the same item may be called both
-- ways (a daemon that does not know the item yet asks off the grid).
local function share(key, ekey, tkey, gkey, limit, demand, held, integral, hruns, sweep_gkey, claims)
	ekey = ekey or (key .. ':exp')
	tkey = tkey or (key .. ':totals')
	if gkey ~= nil then
		claims_sweep(gkey, gkey .. ':claimed')
	end
	local t = totals(key, ekey, tkey, gkey, sweep_gkey)
	local mine = parse_entry(redis.call('HGET', key, me))
	if mine ~= nil then
		count_in(t, tkey, mine, -1)
		if gkey == nil and sweep_gkey ~= nil and #mine.runs > 0 then
			grid_set(sweep_gkey, mine.runs, false) -- off the grid now: its ranks go
		end
	end
	-- What the others may be using until they hear again: the larger of what they
	-- last reported and what they were last granted.
	local others = t.u
	-- On the grid no machine bursts beyond its own slots: the whole rate.
	local budget = limit
	if not integral and gkey == nil then
		budget = math.floor(limit * ppm / 1000000)
	end
	-- The fair part: what it asks, and an equal part of what nobody asks for,
	-- while the demands fit the budget; the water level when they do not.
	local target
	if t.d + demand <= budget then
		target = demand + math.floor((budget - t.d - demand) / (t.n + 1))
	else
		target = math.min(demand, level(t, tkey, budget, demand))
	end
	local grant = math.max(0, math.min(target, budget - others))
	-- Short by more than rounding (a hundredth of a rate): the others are told.
	local slack = 0
	if not integral then
		slack = math.floor(budget / 100)
	end
	if grant + slack < target and grant < demand then
		short = true
	end
	local unsettled = grant
	if settling == 1 then
		grant = math.min(grant, held)
	end
	local runs, own = {}, {}
	if gkey ~= nil and limit > 0 then
		-- What it reports holding beyond its entry is taken where still free
		-- (Redis came back empty, or its entry expired while it was cut off);
		-- ranks another holds are not its to keep.
		local mine_runs = (mine ~= nil and mine.runs) or {}
		if mine == nil then
			-- Its entry expired while it was cut off: its ranks, still quarantined,
			-- are its own again (they stay taken).
			local q, rest, back = quarantine_read(key), {}, {}
			for _, x in ipairs(q) do
				if x.m == me then
					back = runs_union(back, x.runs)
				else
					rest[#rest + 1] = x
				end
			end
			if #rest < #q then
				quarantine_write(key, rest)
				mine_runs = back
			end
		end
		local reported = runs_parse(hruns)
		local claimed = grid_free_parts(gkey, runs_diff(reported, mine_runs))
		grid_set(gkey, claimed, true)
		own = runs_union(mine_runs, claimed)
		local holds = runs_diff(reported, runs_diff(reported, own))
		-- Rounded up: what limits the grid is its ranks, all of them handed out,
		-- and a share converted back and forth must not shrink a rank a call.
		-- Settling, nobody gets more ranks than it holds.
		local want = math.ceil(unsettled * GRID_RANKS / limit)
		if settling == 1 then
			want = math.min(want, runs_size(holds))
		end
		if claims then
			-- Served by claims: its fair part is counted as in use (others are
			-- granted around it, and its ranks stay free for the claims), but it
			-- takes no rank; those it still holds are kept until it reports them
			-- given up.
			want = 0
		end
		runs = grid_take(gkey, holds, own, want)
		if not claims then
			grant = math.floor(runs_size(runs) * limit / GRID_RANKS)
		end
		local keep = runs_union(holds, runs)
		grid_set(gkey, runs_diff(own, keep), false)
		own = keep
	end
	local e = {held = held, grant = grant, exp = now + ttl, demand = demand}
	count_in(t, tkey, e, 1)
	local v = int(held) .. ':' .. int(grant) .. ':' .. int(e.exp) .. ':' .. int(demand)
	if gkey ~= nil then
		v = v .. ':' .. runs_string(own)
	end
	redis.call('HSET', key, me, v)
	redis.call('ZADD', ekey, e.exp, me)
	for _, k in ipairs({key, ekey, tkey, gkey}) do
		redis.call('PEXPIRE', k, ttl * (4 + QUARANTINE_LIVES)) -- outliving any quarantine
	end
	return grant, t.n, runs
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

if claim_call then
	local gkey, ckey, cur = KEYS[2], KEYS[3], KEYS[4]
	local interval, want, lead = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
	local out = {now, settling, now_us}
	if settling == 1 or gkey == nil or ckey == nil or cur == nil or interval == nil or want == nil or
		lead == nil or interval < 1000 or want < 1 or lead < 0 then
		return out
	end
	want = math.min(want, 64)
	claims_sweep(gkey, ckey)
	local v = grid_get(gkey)
	if #v ~= GRID_RANKS then
		return out
	end
	local iv_us = interval / 1000
	local k = math.floor((now_us + lead) / iv_us) + 1
	-- No further than two lease lives ahead (8 slots at least): the cursor key
	-- lives four, so a claim never outlives the cursor that keeps its slot from
	-- being claimed again.  Within that, a fleet asking more than its rate
	-- queues in its claims, as one call a request queues in a GCRA's tat: with
	-- a round's horizon, 200 machines each with a caller waiting were refused
	-- at every call but the few the round held, and asked again when it had
	-- room - 14 calls a second a machine.  A claim further ahead than a round
	-- is still the machine's shortfall (fleet_claims.c), so a machine beside
	-- others holding ranks is given a part that grows, as before.
	local last = k + math.max(8, math.floor(ttl * 2000 / iv_us))
	-- Never before the cursor: every slot before it may be claimed already (a
	-- claimed rank is marked, not each of its slots).  The cursor is an instant
	-- of Redis's time (us), the end of the last slot claimed, so that a changed
	-- rate (another interval) neither claims an instant twice nor skips ahead
	-- by the ratio of the two.
	local c = tonumber(redis.call('GET', cur))
	if c ~= nil then
		c = math.ceil(c / iv_us - 1e-6)
		if c > k then
			k = c
		end
	end
	if k > last then
		-- The horizon is claimed to its end: room in so many microseconds, as a
		-- negative number (-x - 1), so the machine asks again then, not a round
		-- later (fleet_claims.c).
		out[#out + 1] = -math.floor((k - last) * iv_us) - 1
		return out
	end
	local picked = {}
	for _ = 1, CLAIM_WALK do
		if #picked >= want or k > last then
			break
		end
		local r = bitrev12(k % GRID_RANKS)
		local b = string.byte(v, r + 1)
		if b == 0 or b == 2 then
			picked[#picked + 1] = k
			out[#out + 1] = k
			if b == 0 then
				redis.call('SETRANGE', gkey, r, '\2')
				v = string.sub(v, 1, r) .. '\2' .. string.sub(v, r + 2)
			end
			-- Claimed until this slot has ended and 100 ms more (or an interval,
			-- if longer): the machine may release up to an interval after its
			-- start as it places it, late against Redis by its clock's error.
			redis.call('ZADD', ckey, math.ceil((k + 1) * iv_us / 1000) + math.max(100, math.ceil(iv_us / 1000)), r)
		end
		k = k + 1
	end
	grids[gkey] = v
	if #picked > 0 then
		-- The cursor outlives every slot it has handed out (and four lease lives
		-- more): were it gone while a claimed slot is still ahead, a claim
		-- after would start before it and take that slot again.
		local ends_us = (picked[#picked] + 1) * iv_us
		redis.call('SET', cur, string.format('%.0f', math.floor(ends_us)), 'PX',
			ttl * 4 + math.max(0, math.ceil(ends_us / 1000) - now))
	end
	redis.call('PEXPIRE', ckey, ttl * 4 + math.ceil(4 * GRID_RANKS * iv_us / 1000))
	return out
end

local out = {now, settling, now_us}
for i = 1, n do
	local base = 5 + (i - 1) * FIELDS
	local kind = ARGV[base + 1]
	local limit, window = num(ARGV[base + 2]), num(ARGV[base + 3])
	local demand, held = num(ARGV[base + 4]), num(ARGV[base + 5])
	local key = KEYS[1 + i]
	local g, count, id, stop, runs = 0, 0, 0, 0, {}
	if key == nil or window == 0 then
		g = 0
	elseif kind == 'r' or kind == 'c' then
		g, count = share(key, KEYS[1 + 2 * n + i], KEYS[1 + 3 * n + i], nil, limit, demand, held, kind == 'c', nil,
			kind == 'r' and (KEYS[1 + 4 * n + i] or (key .. ':grid')) or nil)
	elseif kind == 'g' or kind == 'q' then
		g, count, runs = share(key, KEYS[1 + 2 * n + i], KEYS[1 + 3 * n + i], KEYS[1 + 4 * n + i] or (key .. ':grid'),
			limit, demand, held, false, ARGV[base + 7], nil, kind == 'q')
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
	for k = 1, GRID_RUNS do
		local x = runs[k]
		out[#out + 1] = x and (x[1] * 8192 + x[2]) or 0
	end
end
if short then
	redis.call('PUBLISH', (string.gsub(KEYS[1], ':epoch$', ':wake')), me)
end
return out

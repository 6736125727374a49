// node keyed_requests.js PORT NAMES PER_NAME PARALLEL [RETURNING EVERY_MS COUNT BURST PASSES]:
// HTTP GETs to 127.0.0.1:PORT, each on a connection of its own, with Host headers
// n0.keyed.test .. n<NAMES-1>.keyed.test: PARALLEL workers take the names in turn
// and make PER_NAME requests for each, one after the other.  With RETURNING, that
// name also asks BURST requests at once every EVERY_MS ms, COUNT times, while the
// others go by; PASSES times over all the names (default once).  Prints
// "done OK FAILED SECONDS"; a failed request (refused, reset) is counted, not fatal.
// Exits 1 when a response is wrong, or after 120 s.
const http = require("http");
const [port, names, perName, parallel] = process.argv.slice(2, 6).map(Number);
const returning = process.argv[6], every = +process.argv[7], count = +process.argv[8];
const burst = +(process.argv[9] || 1), passes = +(process.argv[10] || 1);
const t0 = process.hrtime.bigint();
let ok = 0, failed = 0, next = 0;

function get(host, path) {
	return new Promise(resolve => {
		const req = http.request({host: "127.0.0.1", port, path, agent: false, headers: {Host: host}},
			res => {
				let body = "";
				res.on("data", d => { body += d; });
				res.on("end", () => {
					if (body !== "hello " + path + "\n") {
						console.error("bad response for " + host + path + ": " + JSON.stringify(body));
						process.exit(1);
					}
					ok++;
					resolve();
				});
			});
		req.on("error", e => {
			console.error("failed " + host + path + ": " + (e.code || e.message));
			failed++;
			resolve();
		});
		req.end();
	});
}

async function worker() {
	while (next < names * passes) {
		const i = next++ % names;
		for (let r = 0; r < perName; r++)
			await get("n" + i + ".keyed.test", "/n" + i + "-" + r);
	}
}

// The returning name's rounds start every EVERY_MS ms whether or not the last one
// is done: its key stays busy with a queue while it is not being asked.
async function returner() {
	const pending = [];
	for (let r = 0; r < count; r++) {
		for (let b = 0; b < burst; b++)
			pending.push(get(returning, "/r" + r + "-" + b));
		await new Promise(res => setTimeout(res, every));
	}
	await Promise.all(pending);
}

const all = [];
for (let w = 0; w < parallel; w++)
	all.push(worker());
if (returning)
	all.push(returner());
Promise.all(all).then(() => {
	const secs = Number(process.hrtime.bigint() - t0) / 1e9;
	console.log("done " + ok + " " + failed + " " + secs.toFixed(3));
	process.exit(0);
});
setTimeout(() => { console.error("timed out: " + ok + " ok, " + failed + " failed"); process.exit(1); }, 120000);

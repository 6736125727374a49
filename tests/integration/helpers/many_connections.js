// node many_connections.js PORT N: N connections to 127.0.0.1:PORT opened at once,
// each closed once connected.  Prints "done OPENED SECONDS WORST_STALL_MS": how many
// connected, how long all took, and the event loop's longest gap between 1 ms
// timer ticks meanwhile.  Exits 1 on any connection error, or after 60 s.
const net = require("net");
const port = +process.argv[2], n = +process.argv[3];
const t0 = process.hrtime.bigint();
let done = 0, worst = 0n, last = t0;
const tick = setInterval(() => {
	const now = process.hrtime.bigint();
	if (now - last > worst) worst = now - last;
	last = now;
}, 1);
for (let i = 0; i < n; i++) {
	const s = net.connect({host: "127.0.0.1", port});
	s.on("connect", () => { s.destroy(); if (++done === n) finish(); });
	s.on("error", e => { console.error("connection " + i + ": " + e.message); process.exit(1); });
}
function finish() {
	clearInterval(tick);
	const secs = Number(process.hrtime.bigint() - t0) / 1e9;
	console.log("done " + done + " " + secs.toFixed(3) + " " + (Number(worst / 1000n) / 1000).toFixed(1));
	process.exit(0);
}
setTimeout(() => { console.error("timed out with " + done + " of " + n); process.exit(1); }, 60000);

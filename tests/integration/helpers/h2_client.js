// h2_client.js URL SECONDS [STREAMS] [AT:PATH]...: one HTTP/2 connection (h2c with
// prior knowledge, or TLS when URL is https: NODE_EXTRA_CA_CERTS names the CA), with
// STREAMS requests (default 4) always open on it, each to URL/nN, for SECONDS; each
// cue - a request to PATH - goes AT seconds after the start.  Every answer must come
// whole; prints how many of each status came back, exits 1 on any error.  Bounded by
// its deadline (and a hard stop 30 s past it).
'use strict';
const http2 = require('http2');
const [url, seconds, streamsArg, ...cueArgs] = process.argv.slice(2);
const streams = +(streamsArg || 4);
const cues = cueArgs.map(c => { const i = c.indexOf(':'); return [+c.slice(0, i), c.slice(i + 1)]; })
	.sort((a, b) => a[0] - b[0]);
const start = Date.now(), end = start + 1000 * +seconds;
const counts = {};
let n = 0, open = 0, failed = false;
const session = http2.connect(url);
session.on('error', e => { console.error('session:', e.message); process.exit(1); });
setTimeout(() => { console.error('hard stop'); process.exit(1); }, end - start + 30000).unref();

function next() {
	if (Date.now() >= end) {
		if (open === 0) {
			console.log(JSON.stringify(counts));
			session.close();
		}
		return;
	}
	let path = '/n' + n++;
	if (cues.length && Date.now() - start >= 1000 * cues[0][0])
		path = cues.shift()[1];
	open++;
	const req = session.request({ ':path': path });
	let status = 0, body = '';
	req.setEncoding('utf8');
	req.on('response', h => { status = h[':status']; });
	req.on('data', d => { body += d; });
	req.on('end', () => {
		open--;
		if (!body.startsWith('hello ')) {
			console.error('bad body for', path, JSON.stringify(body));
			failed = true;
			process.exit(1);
		}
		counts[status] = (counts[status] || 0) + 1;
		next();
	});
	req.on('error', e => { console.error(path, e.message); process.exit(1); });
	req.end();
}
for (let i = 0; i < streams; i++)
	next();

// h2_posts.js URL COUNT BYTES [K:PATH]: one HTTP/2 connection (h2c with prior
// knowledge), COUNT POST requests begun at once, each with a body of BYTES bytes,
// to URL/pN - what node's http2 (nghttp2) writes as every HEADERS first, then the
// bodies; request K goes to PATH instead.  Every answer must come whole ("hello
// /pN", "hello PATH"); prints "done COUNT", exits 1 on any error.  A hard stop
// 60 s after the start.
'use strict';
const http2 = require('http2');
const [url, countArg, bytesArg, cue] = process.argv.slice(2);
const cueAt = cue ? +cue.slice(0, cue.indexOf(':')) : -1, cuePath = cue ? cue.slice(cue.indexOf(':') + 1) : '';
const count = +countArg, body = Buffer.alloc(+bytesArg, 'x');
const session = http2.connect(url);
session.on('error', e => { console.error('session:', e.message); process.exit(1); });
setTimeout(() => { console.error('hard stop'); process.exit(1); }, 60000).unref();
let done = 0;
for (let i = 0; i < count; i++) {
	const path = i === cueAt ? cuePath : '/p' + i;
	const req = session.request({':method': 'POST', ':path': path, 'content-type': 'application/octet-stream'});
	let got = '';
	req.setEncoding('utf8');
	req.on('data', d => { got += d; });
	req.on('error', e => { console.error('p' + i + ':', e.message); process.exit(1); });
	req.on('end', () => {
		if (got !== 'hello ' + path.split('?')[0] + '\n') {
			console.error('p' + i + ': answered ' + JSON.stringify(got));
			process.exit(1);
		}
		if (++done === count) {
			console.log('done ' + count);
			session.close();
		}
	});
	req.end(body);
}

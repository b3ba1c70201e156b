import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The few static files the pages use, read once. */
const require = createRequire(import.meta.url);

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#fff}
header.top{display:flex;justify-content:space-between;align-items:center;padding:8px 20px;background:#0d4f2b;color:#fff}
header.top a.brand{color:#fff;font-weight:600;text-decoration:none}
form.signout{display:flex;gap:8px;align-items:center}form.signout button{font-size:12px}
main{padding:12px 20px;max-width:1200px}
h1{font-size:20px}h2{font-size:16px;margin-top:24px;border-bottom:1px solid #d0d7de}h3{font-size:14px}
.muted{color:#656d76}.error{color:#b42318}.warning,.retry-note{color:#9a6700}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#eaeef2}
.badge-pull_request,.badge-passed{background:#dafbe1}.badge-failed,.badge-error,.badge-timed_out{background:#ffebe9}
.badge-running{background:#ddf4ff}.badge-cancelled,.badge-stale{background:#fff8c5}
dl.stats,.stats dl,dl.queue{display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dt{color:#656d76}dd{margin:0}
pre.text{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:8px;border-radius:6px;max-height:480px;overflow:auto;font-size:12px}
ol.timeline{list-style:none;padding:0}li.step{border:1px solid #d0d7de;border-radius:6px;margin:8px 0;padding:8px}
.step-head{margin-bottom:4px}.tool{border-left:3px solid #3b6fb6;padding-left:8px;margin:6px 0}.tool-name{font-weight:600}
.tests{display:grid;grid-template-columns:1fr 1fr;gap:12px}
table{border-collapse:collapse}td,th{border-bottom:1px solid #eaeef2;padding:4px 8px;text-align:left;vertical-align:top}
form.filters{display:flex;gap:12px;margin:8px 0}
.live-note{color:#0969da}
`;

const LIVE_JS = `
// Live run page: server-sent events carry server-rendered HTML; the finished run is reloaded as a static page.
(function () {
  var run = document.getElementById('run');
  if (!run || !run.dataset.live) return;
  var source = new EventSource(run.dataset.events);
  function apply(data) {
    var msg = JSON.parse(data);
    if (msg.append) {
      var timeline = document.getElementById('timeline');
      timeline.insertAdjacentHTML('beforeend', msg.append);
    }
    if (msg.timeline !== undefined) document.getElementById('timeline').innerHTML = msg.timeline;
    Object.keys(msg.sections || {}).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.innerHTML = msg.sections[id];
    });
  }
  source.addEventListener('update', function (e) { apply(e.data); });
  source.addEventListener('done', function () { source.close(); location.reload(); });
  // The server ended the stream: the session ended or GitHub no longer grants access.
  source.addEventListener('denied', function () {
    source.close();
    var note = document.getElementById('live-note');
    if (note) note.textContent = 'Live updates stopped: your sign-in or your access to this repository ended. Reload to check.';
  });
})();
`;

export const ASSETS: Record<string, { type: string; body: Buffer }> = {
  'run-pages.css': { type: 'text/css; charset=utf-8', body: Buffer.from(CSS) },
  'live.js': { type: 'text/javascript; charset=utf-8', body: Buffer.from(LIVE_JS) },
  'diff2html.css': { type: 'text/css; charset=utf-8', body: readFileSync(require.resolve('diff2html/bundles/css/diff2html.min.css')) },
};

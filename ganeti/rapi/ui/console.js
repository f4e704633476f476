// The serial console of one instance in the browser (doc/webui.md, "Consoles"): a
// single-use token from POST /2/instances/NAME/console/token (an operator's write, with
// the CSRF token), then a WebSocket to .../console/websocket?token=..., which the master
// relays to the console on the instance's primary node.  The terminal is term.js
// (Debian libjs-term.js, served as /ui/vendor/term.js): keys go out as text messages,
// the console's bytes come in as binary messages.
import { api, consolePage, showError } from "/ui/common.js";

const name = new URLSearchParams(location.search).get("name") || "";
const stateBox = document.getElementById("state");
const button = document.getElementById("connect");
let sock = null;

const term = new window.Terminal({ cols: 80, rows: 24, useStyle: false, screenKeys: false,
                                   cursorBlink: false });
term.open(document.getElementById("terminal"));
term.on("data", (data) => {
  if (sock && sock.readyState === WebSocket.OPEN) sock.send(data);
});

function state(text, connected) {
  stateBox.textContent = text;
  button.disabled = connected;
  document.body.dataset.console = connected ? "open" : "closed";
}

async function connect() {
  button.disabled = true;
  state("connecting...", true);
  let grant;
  try {
    grant = await api("POST", "/2/instances/" + encodeURIComponent(name) + "/console/token");
  } catch (err) {
    state("not connected", false);
    showError(err);
    return;
  }
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(scheme + location.host + grant.websocket + "?token=" +
                           encodeURIComponent(grant.token));
  ws.binaryType = "arraybuffer";
  const decoder = new TextDecoder();
  ws.addEventListener("open", () => { state("connected", true); term.focus(); });
  ws.addEventListener("message", (ev) => {
    if (typeof ev.data === "string") term.write(ev.data);
    else term.write(decoder.decode(new Uint8Array(ev.data), { stream: true }));
  });
  ws.addEventListener("close", (ev) => {
    if (sock === ws) sock = null;
    state("closed" + (ev.reason ? ": " + ev.reason : ""), false);
  });
  sock = ws;
}

await consolePage("console", name, connect, state);

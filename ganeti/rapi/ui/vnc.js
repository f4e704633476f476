// The VNC console of one instance in the browser (doc/webui.md, "Consoles"): a single-use
// token from POST /2/instances/NAME/console/token?kind=vnc (an operator's write, with the
// CSRF token; its answer carries the VNC password when the instance has one), then noVNC
// (Debian's novnc, its ES modules served under /ui/vendor/novnc/) on the WebSocket
// .../console/websocket?kind=vnc&token=..., which the master relays to the instance's VNC
// server on its primary node.  document.body.dataset.vnc is "connected" while it is.
import RFB from "/ui/vendor/novnc/core/rfb.js";
import { api, consolePage, showError } from "/ui/common.js";

const name = new URLSearchParams(location.search).get("name") || "";
const stateBox = document.getElementById("state");
const button = document.getElementById("connect");
const cad = document.getElementById("cad");
let rfb = null;

function state(text, connected) {
  stateBox.textContent = text;
  button.disabled = connected;
  cad.disabled = !connected;
  document.body.dataset.vnc = connected ? "connected" : "closed";
}

async function connect() {
  button.disabled = true;
  stateBox.textContent = "connecting...";
  let grant;
  try {
    grant = await api("POST", "/2/instances/" + encodeURIComponent(name) +
                      "/console/token?kind=vnc");
  } catch (err) {
    state("not connected", false);
    showError(err);
    return;
  }
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const url = scheme + location.host + grant.websocket +
    (grant.websocket.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(grant.token);
  const options = { wsProtocols: ["binary"], shared: true };
  if (grant.password !== undefined) options.credentials = { password: grant.password };
  const client = new RFB(document.getElementById("screen"), url, options);
  client.scaleViewport = false;
  client.addEventListener("connect", () => { state("connected", true); client.focus(); });
  client.addEventListener("disconnect", (ev) => {
    if (rfb === client) rfb = null;
    state(ev.detail.clean ? "closed" : "closed: the connection failed", false);
  });
  client.addEventListener("credentialsrequired", () => {
    state("not connected: the VNC server asks for a password this console has not got",
          false);
    client.disconnect();
  });
  client.addEventListener("securityfailure", (ev) => {
    state("not connected: VNC authentication failed" +
          (ev.detail.reason ? " (" + ev.detail.reason + ")" : ""), false);
  });
  client.addEventListener("desktopname", (ev) => {
    document.title = "Ganeti - VNC of " + name + " (" + ev.detail.name + ")";
  });
  rfb = client;
}

cad.addEventListener("click", () => { if (rfb) rfb.sendCtrlAltDel(); });
await consolePage("VNC", name, connect, state);

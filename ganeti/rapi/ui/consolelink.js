// The instance page's links to its consoles: the serial console (console.html?name=NAME)
// and, shown by instance.js when the instance has VNC, the VNC console (vnc.html).
const name = new URLSearchParams(location.search).get("name") || "";
document.getElementById("console-link").href = "/ui/console.html?name=" + encodeURIComponent(name);
document.getElementById("vnc-link").href = "/ui/vnc.html?name=" + encodeURIComponent(name);

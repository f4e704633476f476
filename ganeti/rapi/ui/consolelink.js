// The instance page's link to its serial console (console.html?name=NAME).
const name = new URLSearchParams(location.search).get("name") || "";
document.getElementById("console-link").href = "/ui/console.html?name=" + encodeURIComponent(name);

// The login form: POST /ui/login, then the page asked for (or the cluster overview).
import { api, showError } from "/ui/common.js";

const form = document.getElementById("login");
form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    await api("POST", "/ui/login", {
      user: document.getElementById("user").value,
      password: document.getElementById("password").value,
    });
    const next = new URLSearchParams(location.search).get("next") || "";
    // only a path of the console itself, never another site
    location.assign(next.startsWith("/ui/") && !next.startsWith("//") ? next : "/ui/");
  } catch (err) {
    showError(err.status === 401 ? new Error("Invalid user name or password") : err);
  }
});

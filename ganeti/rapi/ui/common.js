// Shared by every page of the web console: RAPI calls with the session cookie and the
// CSRF header, the session, the navigation bar, the event stream (doc/webui.md).

let csrf = null;

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// One RAPI request; a write carries the session's CSRF token, as does a write-only GET
// (``writeGet``: node storage units, doc/rapi.md).  Answers the decoded JSON.
export async function api(method, path, body, writeGet = false) {
  const headers = { "Accept": "application/json" };
  if ((method !== "GET" || writeGet) && csrf) headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers, credentials: "same-origin", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    const msg = (data && (data.explain || data.message)) || resp.statusText;
    throw new ApiError(resp.status, msg);
  }
  return data;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

export function instanceLink(name) {
  return el("a", { href: "/ui/instance.html?name=" + encodeURIComponent(name) }, name);
}

// The logged-in session ({user, role, csrf_token}); without one, the login page.
export async function session() {
  try {
    const s = await api("GET", "/ui/session");
    csrf = s.csrf_token;
    return s;
  } catch (err) {
    if (err.status === 401 || err.status === 400) {
      location.replace("/ui/login.html?next=" + encodeURIComponent(location.pathname + location.search));
      return new Promise(() => {});
    }
    throw err;
  }
}

export async function logout() {
  try { await api("POST", "/ui/logout"); } finally { location.assign("/ui/login.html"); }
}

// The page's header: links, who is logged in, the logout button.
export function navbar(s) {
  const nav = document.getElementById("nav");
  const out = el("button", { id: "logout", type: "button" }, "Log out");
  out.addEventListener("click", logout);
  nav.replaceChildren(
    el("a", { href: "/ui/" }, "Cluster"), el("a", { href: "/ui/instances.html" }, "Instances"),
    el("a", { href: "/ui/jobs.html" }, "Jobs"),
    el("span", { id: "whoami" }, `${s.user} (${s.role})`), out);
}

export function showError(err) {
  const box = document.getElementById("error");
  box.textContent = String(err.message || err);
  box.hidden = false;
}

// The cluster's event stream (RAPI GET /2/events): handler(event) for each event of
// the given types; EventSource reconnects by itself with Last-Event-ID.
export function events(types, handler) {
  const source = new EventSource("/2/events");
  for (const type of types) {
    source.addEventListener(type, (msg) => handler(JSON.parse(msg.data)));
  }
  return source;
}

// One read of a page's state at a time.  A call while a read runs makes it read once
// more when that one ends, so the last read starts after the last change: two reads
// answered out of order (a slow one begun before a change) would leave the older state
// on the page.  The promise settles with a read begun after the call.
export function serial(read) {
  let running = null;
  let again = false;
  async function loop() {
    try {
      for (;;) {
        again = false;
        try {
          await read();
        } catch (err) {
          if (!again) throw err;
        }
        if (!again) return;
      }
    } finally {
      running = null;
    }
  }
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = loop();
    return running;
  };
}

export function statusClass(status) {
  if (status === "running") return "ok";
  if (status === "ADMIN_down" || status === "USER_down") return "down";
  return "bad";
}

// a use bar (<meter>) of ``total - free`` of ``total`` with its figures, or "-"
export function bar(total, free, unit) {
  if (!total) return "-";
  const used = total - (free || 0);
  const meter = el("meter", { min: "0", max: String(total), value: String(used),
                              high: String(total * 0.9), optimum: "0" });
  return el("span", {}, meter, ` ${used} / ${total} ${unit}`);
}

// The start of a console page (console.html, vnc.html): the nav bar, the instance's
// link in #name, the title ("Ganeti - WHAT of NAME"), the #connect button; a readonly
// user gets the reason through state(text, connected) and no connection, anyone else
// is connected at once.  Marks the page ready; the session is returned.
export async function consolePage(what, name, connect, state) {
  const s = await session();
  navbar(s);
  const link = document.getElementById("name");
  link.textContent = name;
  link.href = "/ui/instance.html?name=" + encodeURIComponent(name);
  document.title = "Ganeti - " + what + " of " + name;
  const button = document.getElementById("connect");
  button.addEventListener("click", connect);
  if (s.role === "readonly") {
    state("your role (readonly) cannot open consoles", false);
    button.disabled = true;
  } else {
    connect();
  }
  document.body.dataset.ready = "1";
  return s;
}

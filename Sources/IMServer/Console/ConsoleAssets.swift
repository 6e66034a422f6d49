/// The console's pages, style and script, served from the binary (no file to deploy, nothing from
/// a CDN). The script is plain JavaScript without a framework: each page of the console is a
/// function that asks the admin API and draws the answer; every element a test or a person acts
/// on has a stable id.
enum ConsoleAssets {
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func loginPage(error: String?) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>imserver console: sign in</title><link rel="stylesheet" href="/console/console.css"></head>
        <body class="login">
        <form id="login" method="post" action="/console/login">
          <h1>imserver console</h1>
          <label>Name <input id="name" name="name" value="admin" autocomplete="username" required></label>
          <label>Password <input id="password" name="password" type="password" autocomplete="current-password" required autofocus></label>
          <button id="login-submit" type="submit">Sign in</button>
          \(error.map { "<p id=\"login-error\" class=\"error\">\(escape($0))</p>" } ?? "")
          <p class="hint">The password was printed when the server first started, or set with consolePassword.</p>
        </form>
        </body></html>
        """
    }

    static func shell(operatorName: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>imserver console</title><link rel="stylesheet" href="/console/console.css"></head>
        <body>
        <header>
          <strong>imserver</strong>
          <label class="app">App <select id="app-select"></select></label>
          <span class="who">\(escape(operatorName))</span>
          <form method="post" action="/console/logout"><button id="logout" type="submit">Sign out</button></form>
        </header>
        <nav id="nav">
          <a href="#overview" data-page="overview">Overview</a>
          <a href="#apps" data-page="apps">Apps</a>
          <a href="#settings" data-page="settings">Settings</a>
          <a href="#users" data-page="users">Users</a>
          <a href="#groups" data-page="groups">Groups</a>
          <a href="#chatrooms" data-page="chatrooms">Chatrooms</a>
          <a href="#ultragroups" data-page="ultragroups">Ultra groups</a>
          <a href="#history" data-page="history">History</a>
          <a href="#words" data-page="words">Sensitive words</a>
          <a href="#statistics" data-page="statistics">Statistics</a>
          <a href="#account" data-page="account">Account</a>
        </nav>
        <div id="status" role="status"></div>
        <main id="page"></main>
        <script src="/console/console.js"></script>
        </body></html>
        """
    }

    static let style = #"""
    * { box-sizing: border-box; }
    body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; background: #f4f6f9; }
    header { display: flex; flex-wrap: wrap; gap: .6rem 1rem; align-items: center; padding: .6rem 1rem; background: #1d2a44; color: #fff; }
    header .app { margin-left: auto; }
    header select, header button { font: inherit; }
    header form { margin: 0; }
    nav { display: flex; flex-wrap: wrap; gap: .2rem; padding: .4rem .6rem; background: #fff; border-bottom: 1px solid #dde2ea; }
    nav a { padding: .35rem .6rem; border-radius: 6px; color: #1d2a44; text-decoration: none; }
    nav a.active { background: #1d2a44; color: #fff; }
    main { padding: 1rem; max-width: 1100px; }
    h2 { margin: .2rem 0 .8rem; font-size: 1.25rem; }
    h3 { margin: 1.2rem 0 .5rem; font-size: 1.05rem; }
    section, .card { background: #fff; border: 1px solid #dde2ea; border-radius: 8px; padding: .8rem 1rem; margin-bottom: 1rem; }
    .cards { display: flex; flex-wrap: wrap; gap: .8rem; }
    .card { min-width: 9rem; flex: 1; }
    .card b { display: block; font-size: 1.6rem; }
    .scroll { overflow-x: auto; }
    table { border-collapse: collapse; width: 100%; }
    th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #e7ebf0; vertical-align: top; }
    th { font-weight: 600; background: #f7f9fb; }
    td.content { max-width: 28rem; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: .85rem; }
    input, select, textarea, button { font: inherit; padding: .35rem .5rem; border: 1px solid #c4cbd6; border-radius: 6px; }
    input[type=checkbox] { width: 1.1rem; height: 1.1rem; }
    button { background: #1d2a44; color: #fff; border-color: #1d2a44; cursor: pointer; }
    button.secondary { background: #fff; color: #1d2a44; }
    button.danger { background: #b3261e; border-color: #b3261e; }
    .row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .4rem 0; }
    .row label { display: flex; gap: .35rem; align-items: center; }
    .doc { color: #5b6475; font-size: .85rem; }
    .own { color: #0b6b3a; font-weight: 600; }
    pre { background: #f7f9fb; padding: .6rem; border-radius: 6px; overflow-x: auto; font-size: .85rem; }
    textarea { width: 100%; min-height: 6rem; font-family: ui-monospace, monospace; font-size: .85rem; }
    #status { margin: .6rem 1rem 0; min-height: 1.4rem; }
    #status.ok { color: #0b6b3a; }
    #status.error, .error { color: #b3261e; }
    .secret { font-family: ui-monospace, monospace; background: #fff6d6; padding: .5rem; border-radius: 6px; overflow-wrap: anywhere; }
    .chart { width: 100%; height: 180px; }
    .chart rect { fill: #3b6bc9; }
    .chart text { font-size: 10px; fill: #5b6475; }
    body.login { display: flex; min-height: 100vh; align-items: center; justify-content: center; }
    #login { background: #fff; border: 1px solid #dde2ea; border-radius: 10px; padding: 1.5rem; width: min(24rem, 92vw); display: grid; gap: .8rem; }
    #login label { display: grid; gap: .25rem; }
    #login h1 { margin: 0; font-size: 1.3rem; }
    .hint { color: #5b6475; font-size: .85rem; margin: 0; }
    @media (max-width: 600px) { main { padding: .6rem; } header .app { margin-left: 0; } th, td { padding: .3rem; } }
    """#

    static let script = #"""
    "use strict";
    const HEADERS = { "X-Requested-By": "imserver-console" };
    const TYPES = { 1: "private", 3: "group", 4: "chatroom", 6: "system", 10: "ultra group" };
    let apps = [];
    let appKey = localStorage.getItem("imconsole.app") || "";
    let refreshTimer = null;

    class ApiError extends Error {
      constructor(code, message) { super(message); this.code = code; }
    }

    async function admin(method, path, body) {
      const options = { method, headers: { ...HEADERS }, credentials: "same-origin" };
      if (body !== undefined) {
        options.headers["Content-Type"] = "application/json";
        options.body = JSON.stringify(body);
      }
      const response = await fetch(path, options);
      let answer;
      try { answer = await response.json(); } catch (e) { answer = { code: response.status, errorMessage: "the server answered " + response.status }; }
      if (response.status === 401 && path.startsWith("/admin/") && answer.code === 1004) {
        location.href = "/console/login";
        throw new ApiError(1004, "signed out");
      }
      if (answer.code !== 200) throw new ApiError(answer.code, answer.errorMessage || "failed");
      return answer;
    }

    /// A Server API call made for the chosen app.
    function appApi(path, params) {
      return admin("POST", "/admin/apps/" + encodeURIComponent(appKey) + "/api" + path, params || {});
    }

    function el(tag, attributes, ...children) {
      const node = document.createElement(tag);
      for (const [key, value] of Object.entries(attributes || {})) {
        if (value === undefined || value === null || value === false) continue;
        if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
        else if (key === "text") node.textContent = value;
        else node.setAttribute(key, value === true ? "" : value);
      }
      for (const child of children.flat()) {
        if (child === null || child === undefined) continue;
        node.append(child instanceof Node ? child : document.createTextNode(String(child)));
      }
      return node;
    }

    function table(id, headers, rows) {
      return el("div", { class: "scroll" }, el("table", { id },
        el("thead", {}, el("tr", {}, headers.map(h => el("th", { text: h })))),
        el("tbody", {}, rows.map(r => el("tr", {}, r.map(c => c instanceof Node ? el("td", {}, c) : el("td", { text: c === undefined ? "" : String(c) })))))));
    }

    function status(text, ok) {
      const node = document.getElementById("status");
      node.textContent = text;
      node.className = ok ? "ok" : "error";
    }

    /// Runs an action and says how it went: "done" or the error with its code.
    async function act(label, action) {
      status(label + "…", true);
      try {
        const result = await action();
        status(label + ": done", true);
        return result;
      } catch (error) {
        status(label + " failed: " + error.message + (error.code ? " (" + error.code + ")" : ""), false);
        return undefined;
      }
    }

    function time(ms) { return ms ? new Date(ms).toLocaleString() : ""; }
    function page() { return document.getElementById("page"); }
    function value(id) { return document.getElementById(id).value.trim(); }

    /// The first list of objects in an answer, as a table; the whole answer when there is none.
    function answerView(id, answer) {
      for (const [key, field] of Object.entries(answer)) {
        if (Array.isArray(field) && field.length && typeof field[0] === "object") {
          const headers = [...new Set(field.flatMap(Object.keys))];
          return el("div", {}, el("p", { class: "doc", text: key + ": " + field.length }),
            table(id, headers, field.map(o => headers.map(h => typeof o[h] === "object" ? JSON.stringify(o[h]) : o[h]))));
        }
        if (Array.isArray(field)) {
          return el("div", {}, el("p", { class: "doc", text: key + ": " + field.length }), el("pre", { id, text: field.join("\n") }));
        }
      }
      const shown = { ...answer };
      delete shown.code;
      return el("pre", { id, text: JSON.stringify(shown, null, 2) });
    }

    // MARK: pages

    async function overviewPage() {
      const overview = await admin("GET", "/admin/overview");
      let metrics = {};
      try {
        const response = await fetch("/metrics", { credentials: "same-origin" });
        if (response.ok) metrics = parseMetrics(await response.text());
      } catch (e) { /* metrics off */ }
      const stored = Object.entries(metrics).filter(([k]) => k.startsWith("imserver_messages_stored_total"))
        .map(([k, v]) => [TYPES[(k.match(/conversation_type="(\d+)"/) || [])[1]] || k, v]);
      const connects = Object.entries(metrics).filter(([k]) => k.startsWith("imserver_connects_total"))
        .map(([k, v]) => [(k.match(/code="(\d+)"/) || [])[1] === "0" ? "connected" : "refused " + (k.match(/code="(\d+)"/) || [])[1], v]);
      page().replaceChildren(
        el("h2", { text: "Overview" }),
        el("div", { class: "cards" },
          el("div", { class: "card" }, el("b", { id: "live-connections", text: overview.connections }), "connections"),
          el("div", { class: "card" }, el("b", { id: "live-nodes", text: overview.nodes }), "nodes"),
          el("div", { class: "card" }, el("b", { text: overview.apps.length }), "apps"),
          el("div", { class: "card" }, el("b", { text: overview.outboundQueuedBytes }), "bytes queued to clients")),
        el("h3", { text: "Connections by platform" }),
        table("platforms", ["platform", "connections"], Object.entries(overview.connectionsByPlatform)),
        el("h3", { text: "Connections by app" }),
        table("app-connections", ["app", "name", "banned", "connections"], overview.apps.map(a => [a.appKey, a.name, a.banned ? "yes" : "", a.connections])),
        el("h3", { text: "Since this node started" }),
        table("live-messages", ["messages stored", "count"], stored),
        table("live-connects", ["connects", "count"], connects));
      refreshTimer = setTimeout(() => { if (location.hash === "#overview" || location.hash === "") show(); }, 5000);
    }

    function parseMetrics(text) {
      const values = {};
      for (const line of text.split("\n")) {
        if (!line || line.startsWith("#")) continue;
        const at = line.lastIndexOf(" ");
        values[line.slice(0, at)] = Number(line.slice(at + 1));
      }
      return values;
    }

    async function appsPage() {
      const list = (await admin("GET", "/admin/apps")).apps;
      const created = el("div", { id: "created-app" });
      page().replaceChildren(
        el("h2", { text: "Apps" }),
        el("section", {}, el("h3", { text: "New app" }),
          el("div", { class: "row" }, el("input", { id: "new-app-name", placeholder: "name" }),
            el("button", { id: "create-app", onclick: async () => {
              const answer = await act("create app", () => admin("POST", "/admin/apps", { name: value("new-app-name") }));
              if (!answer) return;
              await loadApps(answer.app.appKey);
              await appsPage();
              document.getElementById("created-app").replaceChildren(el("p", { class: "secret" },
                "App key ", el("b", { id: "created-app-key", text: answer.app.appKey }), " secret ",
                el("b", { id: "created-app-secret", text: answer.app.appSecret }), " (shown once)"));
            } }, "Create")), created),
        table("apps-table", ["app key", "name", "created", "banned", ""], list.map(app => [app.appKey, app.name, time(app.createdAt), app.banned ? "banned" : "",
          el("div", { class: "row" },
            el("button", { class: "secondary", onclick: async () => {
              const name = prompt("New name of " + app.appKey, app.name);
              if (name && await act("rename", () => admin("PUT", "/admin/apps/" + app.appKey, { name }))) { await loadApps(); appsPage(); }
            } }, "Rename"),
            el("button", { class: "secondary", onclick: async () => {
              if (!confirm("A new secret for " + app.appKey + "? Every token issued with the old one stops working.")) return;
              const answer = await act("rotate secret", () => admin("POST", "/admin/apps/" + app.appKey + "/secret"));
              if (answer) document.getElementById("created-app").replaceChildren(el("p", { class: "secret" }, "New secret of " + app.appKey + ": " + answer.app.appSecret));
            } }, "New secret"),
            el("button", { id: "ban-app-" + app.appKey, class: app.banned ? "secondary" : "danger", onclick: async () => {
              if (await act(app.banned ? "lift ban" : "ban app", () => admin("POST", "/admin/apps/" + app.appKey + "/ban", { banned: !app.banned }))) { await loadApps(); appsPage(); }
            } }, app.banned ? "Lift ban" : "Ban"),
            el("button", { class: "danger", onclick: async () => {
              if (prompt("Delete " + app.appKey + " and all its data? Type its key to confirm.") !== app.appKey) return;
              if (await act("delete app", () => admin("DELETE", "/admin/apps/" + app.appKey))) { await loadApps(); appsPage(); }
            } }, "Delete"))])));
    }

    async function settingsPage() {
      const answer = await admin("GET", "/admin/apps/" + appKey + "/settings");
      const rows = answer.settings.map(setting => {
        let input;
        if (setting.type === "bool") input = el("input", { type: "checkbox", id: "setting-" + setting.key, checked: setting.value === true });
        else if (setting.type === "n") input = el("input", { type: "number", id: "setting-" + setting.key, value: setting.value });
        else input = el("input", { id: "setting-" + setting.key, value: setting.value === null ? "" : setting.value });
        input.dataset.key = setting.key;
        input.dataset.type = setting.type;
        input.dataset.original = JSON.stringify(setting.value);
        return [el("div", {}, el("code", { text: setting.key }), el("div", { class: "doc", text: setting.doc + " Allowed: " + setting.allowed + "." })),
          input, JSON.stringify(setting.default), setting.own ? el("span", { class: "own", text: "own" }) : "server's",
          setting.own ? el("button", { class: "secondary", id: "reset-" + setting.key, onclick: async () => {
            if (await act("reset " + setting.key, () => admin("POST", "/admin/apps/" + appKey + "/settings", { reset: [setting.key] }))) settingsPage();
          } }, "Reset") : ""];
      });
      const push = el("pre", { id: "push-settings" }), callbacks = el("pre", { id: "callback-settings" });
      page().replaceChildren(
        el("h2", { text: "Settings of " + appKey }),
        el("p", { class: "doc", text: "Changes apply at once on every node. A value the app does not set follows the server's configuration." }),
        table("settings-table", ["setting", "value", "server's", "", ""], rows),
        el("div", { class: "row" }, el("button", { id: "save-settings", onclick: saveSettings }, "Save changes")),
        el("section", {}, el("h3", { text: "Push" }), push,
          el("textarea", { id: "push-set", placeholder: '{"userSettingsEnabled": true}' }),
          el("button", { id: "push-save", onclick: async () => {
            if (await act("push settings", () => appApi("/push/settings/set.json", JSON.parse(value("push-set") || "{}")))) settingsPage();
          } }, "Set push settings")),
        el("section", {}, el("h3", { text: "Callbacks" }), callbacks,
          el("textarea", { id: "callback-set", placeholder: '{"routingUrl": "https://app.example.com/im/route"}' }),
          el("button", { id: "callback-save", onclick: async () => {
            if (await act("callback settings", () => appApi("/callback/settings/set.json", JSON.parse(value("callback-set") || "{}")))) settingsPage();
          } }, "Set callback settings")));
      appApi("/push/settings/get.json").then(a => { push.textContent = JSON.stringify(a.settings, null, 2); },
        e => { push.textContent = e.message + " (" + e.code + ")"; });
      appApi("/callback/settings/get.json").then(a => { callbacks.textContent = JSON.stringify(a.settings, null, 2); },
        e => { callbacks.textContent = e.message + " (" + e.code + ")"; });
    }

    async function saveSettings() {
      const set = {};
      for (const input of document.querySelectorAll("#settings-table input")) {
        let current;
        if (input.dataset.type === "bool") current = input.checked;
        else if (input.dataset.type === "n") {
          // An emptied number field changes nothing (Reset returns a setting to the server's).
          if (input.value.trim() === "") continue;
          current = Number(input.value);
          if (!Number.isInteger(current)) { status(input.dataset.key + " must be a whole number", false); return; }
        }
        else current = input.value === "" ? null : input.value;
        if (JSON.stringify(current) !== input.dataset.original) set[input.dataset.key] = current;
      }
      if (!Object.keys(set).length) { status("nothing changed", true); return; }
      if (await act("save settings", () => admin("POST", "/admin/apps/" + appKey + "/settings", { set }))) settingsPage().then(() => status("save settings: done", true));
    }

    async function usersPage() {
      const detail = el("div", { id: "user-detail" });
      page().replaceChildren(
        el("h2", { text: "Users" }),
        el("div", { class: "row" },
          el("input", { id: "user-search", placeholder: "user id" }),
          el("button", { id: "user-find", onclick: () => showUser(value("user-search")) }, "Find"),
          el("button", { id: "user-list", class: "secondary", onclick: async () => {
            const answer = await act("list users", () => appApi("/user/query.json", { page: 1, pageSize: 100 }));
            if (answer) detail.replaceChildren(answerView("users-table", answer));
          } }, "List users")),
        detail);
    }

    async function showUser(userId) {
      if (!userId) return;
      const detail = document.getElementById("user-detail");
      const info = await act("user " + userId, () => appApi("/user/info.json", { userId }));
      if (!info) return;
      const sessions = await admin("GET", "/admin/apps/" + appKey + "/users/" + encodeURIComponent(userId) + "/sessions");
      const blocked = await appApi("/user/block/query.json", {}).catch(() => ({ users: [] }));
      const block = (blocked.users || []).find(u => u.userId === userId);
      const hosted = await appApi("/user/profile/batch/query.json", { userId }).catch(() => ({ userList: [] }));
      const profile = (hosted.userList || [])[0];
      detail.replaceChildren(
        el("section", {}, el("h3", { text: "User " + userId }),
          el("p", {}, "Name: ", el("b", { id: "user-name", text: info.userName || "" }), "  Created: " + (info.createTime || "")),
          el("p", { id: "user-blocked", text: block ? "Blocked until " + (block.blockEndTime || "") : "Not blocked" }),
          profile ? el("pre", { id: "user-profile", text: "Profile (version " + profile.version + "): " + profile.userProfile + "\nExtended: " + profile.userExtProfile }) : el("p", { class: "doc", text: "No hosted profile." }),
          el("h3", { text: "Online devices" }),
          table("user-sessions", ["session", "platform", "device", "address", "node"], sessions.sessions.map(s => [s.sessionId, s.platform, s.deviceId, s.address, s.node])),
          el("div", { class: "row" },
            el("label", {}, "Block for minutes ", el("input", { id: "block-minutes", type: "number", value: 60, min: 1, max: 43200 })),
            el("button", { id: "user-ban", class: "danger", onclick: async () => {
              if (await act("block " + userId, () => appApi("/user/block.json", { userId, minute: Number(value("block-minutes")) }))) showUser(userId);
            } }, "Block"),
            el("button", { id: "user-unban", class: "secondary", onclick: async () => {
              if (await act("unblock " + userId, () => appApi("/user/unblock.json", { userId }))) showUser(userId);
            } }, "Unblock"),
            el("button", { id: "user-revoke", class: "secondary", onclick: async () => {
              if (confirm("Revoke every token of " + userId + " issued until now?"))
                await act("revoke tokens", () => appApi("/user/token/expire.json", { userId, time: Date.now() }));
            } }, "Revoke tokens"),
            el("button", { id: "user-disconnect", class: "secondary", onclick: async () => {
              if (await act("disconnect " + userId, () => admin("POST", "/admin/apps/" + appKey + "/users/" + encodeURIComponent(userId) + "/disconnect"))) showUser(userId);
            } }, "Disconnect"),
            el("button", { id: "user-refresh", class: "secondary", onclick: () => showUser(userId) }, "Refresh"))));
    }

    /// A page that looks something up by id and acts on it with Server API calls.
    function lookupPage(title, idLabel, prefix, load, actions) {
      const result = el("div", { id: prefix + "-result" });
      page().replaceChildren(
        el("h2", { text: title }),
        el("div", { class: "row" }, el("input", { id: prefix + "-id", placeholder: idLabel }),
          el("button", { id: prefix + "-load", onclick: async () => {
            const id = value(prefix + "-id");
            if (!id) return;
            const parts = [];
            for (const [label, call] of load) {
              const answer = await act(label, () => call(id));
              if (answer) parts.push(el("h3", { text: label }), answerView(prefix + "-" + label.replace(/\W+/g, "-").toLowerCase(), answer));
            }
            result.replaceChildren(...parts);
          } }, "Load")),
        el("section", {}, el("h3", { text: "Actions" }), ...actions.map(([label, fields, call]) => el("div", { class: "row" },
          ...fields.map(f => el("input", { id: prefix + "-" + f, placeholder: f })),
          el("button", { id: prefix + "-" + label.replace(/\W+/g, "-").toLowerCase(), class: "secondary", onclick: async () => {
            const values = Object.fromEntries(fields.map(f => [f, value(prefix + "-" + f)]));
            await act(label, () => call(value(prefix + "-id"), values));
          } }, label)))),
        result);
    }

    function groupsPage() {
      lookupPage("Groups", "group id", "group", [
        ["Members", id => appApi("/group/user/query.json", { groupId: id })],
        ["Muted members", id => appApi("/group/user/gag/list.json", { groupId: id })],
      ], [
        ["Mute member", ["userId", "minute"], (id, v) => appApi("/group/user/gag/add.json", { groupId: id, userId: v.userId, minute: Number(v.minute) })],
        ["Unmute member", ["unmuteUserId"], (id, v) => appApi("/group/user/gag/rollback.json", { groupId: id, userId: v.unmuteUserId })],
        ["Dismiss group", ["ownerId"], (id, v) => confirm("Dismiss " + id + "?") ? appApi("/group/dismiss.json", { groupId: id, userId: v.ownerId }) : Promise.reject(new ApiError(0, "not confirmed"))],
      ]);
    }

    function chatroomsPage() {
      lookupPage("Chatrooms", "chatroom id", "chatroom", [
        ["Room", id => appApi("/chatroom/query.json", { chatroomId: id })],
        ["Members", id => appApi("/chatroom/user/query.json", { chatroomId: id, count: 500, order: 2 })],
        ["Muted members", id => appApi("/chatroom/user/gag/list.json", { chatroomId: id })],
      ], [
        ["Mute member", ["userId", "minute"], (id, v) => appApi("/chatroom/user/gag/add.json", { chatroomId: id, userId: v.userId, minute: Number(v.minute) })],
        ["Unmute member", ["unmuteUserId"], (id, v) => appApi("/chatroom/user/gag/rollback.json", { chatroomId: id, userId: v.unmuteUserId })],
        ["Destroy room", [], id => confirm("Destroy " + id + "?") ? appApi("/chatroom/destroy.json", { chatroomId: id }) : Promise.reject(new ApiError(0, "not confirmed"))],
      ]);
    }

    function ultraGroupsPage() {
      lookupPage("Ultra groups", "ultra group id", "ultragroup", [
        ["Channels", id => appApi("/ultragroup/channel/get.json", { groupId: id, page: 1, limit: 100 })],
        ["Muted members", id => appApi("/ultragroup/userbanned/get.json", { groupId: id, page: 1, pageSize: 100 })],
      ], [
        ["Mute member", ["userIds", "busChannel"], (id, v) => appApi("/ultragroup/userbanned/add.json", { groupId: id, userIds: v.userIds, busChannel: v.busChannel })],
        ["Unmute member", ["unmuteUserIds", "unmuteBusChannel"], (id, v) => appApi("/ultragroup/userbanned/del.json", { groupId: id, userIds: v.unmuteUserIds, busChannel: v.unmuteBusChannel })],
      ]);
    }

    async function historyPage() {
      const result = el("div", { id: "history-result" });
      page().replaceChildren(
        el("h2", { text: "Conversation history" }),
        el("p", { class: "doc", text: "A conversation's cloud history as one of its users sees it, newest first, for looking into a report." }),
        el("div", { class: "row" },
          el("select", { id: "history-type" }, el("option", { value: "private" }, "one-to-one"), el("option", { value: "group" }, "group")),
          el("input", { id: "history-user", placeholder: "user id" }),
          el("input", { id: "history-target", placeholder: "other user or group id" }),
          el("button", { id: "history-load", onclick: loadHistory }, "Show")),
        result);
    }

    async function loadHistory() {
      const kind = value("history-type"), userId = value("history-user"), targetId = value("history-target");
      const now = Date.now();
      const answer = await act("history", () => appApi("/v3/message/" + kind + "/query.json",
        { userId, targetId, startTime: now, endTime: now - 400 * 86400000, pageSize: 100 }));
      if (!answer) return;
      const type = kind === "group" ? 3 : 1;
      const conversationTarget = message => kind === "group" ? targetId : (message.fromUserId === userId ? targetId : userId);
      document.getElementById("history-result").replaceChildren(table("history", ["sent", "from", "type", "content", "uid", ""],
        answer.data.map(m => [time(m.msgTime), m.fromUserId, m.objectName, el("span", { class: "content", text: m.content.slice(0, 400) }), m.messageUID,
          el("div", { class: "row" },
            el("button", { class: "secondary", "data-uid": m.messageUID, "data-action": "recall", onclick: async () => {
              if (await act("recall", () => appApi("/message/recall.json", { fromUserId: m.fromUserId, conversationType: type, targetId: conversationTarget(m), messageUID: m.messageUID, isAdmin: 1 }))) loadHistory().then(() => status("recall: done", true));
            } }, "Recall"),
            el("button", { class: "danger", "data-uid": m.messageUID, "data-action": "delete", onclick: async () => {
              if (!confirm("Delete this message for everyone?")) return;
              if (await act("delete", () => appApi("/message/recall.json", { fromUserId: m.fromUserId, conversationType: type, targetId: conversationTarget(m), messageUID: m.messageUID, isAdmin: 1, isDelete: 1 }))) loadHistory().then(() => status("delete: done", true));
            } }, "Delete"))])));
    }

    async function wordsPage() {
      const answer = await appApi("/sensitiveword/list.json", { type: 2 });
      const words = answer.words || [];
      page().replaceChildren(
        el("h2", { text: "Sensitive words" }),
        el("div", { class: "row" }, el("input", { id: "word-new", placeholder: "word" }), el("input", { id: "word-replace", placeholder: "replace with (empty: block the message)" }),
          el("button", { id: "word-add", onclick: async () => {
            const params = { word: value("word-new") };
            if (value("word-replace")) params.replaceWord = value("word-replace");
            if (await act("add word", () => appApi("/sensitiveword/add.json", params))) wordsPage().then(() => status("add word: done", true));
          } }, "Add")),
        table("words-table", ["word", "replaced with", ""], words.map(w => [w.word, w.replaceWord || "(blocks the message)",
          el("button", { class: "secondary", onclick: async () => {
            if (await act("delete word", () => appApi("/sensitiveword/batch/delete.json", { words: [w.word] }))) wordsPage();
          } }, "Delete")])));
    }

    async function statisticsPage() {
      const days = Number(localStorage.getItem("imconsole.days") || 30);
      const answer = await admin("GET", "/admin/apps/" + appKey + "/statistics?days=" + days);
      const rows = answer.days.map(d => ({ day: d.day, messages: Object.values(d.messages).reduce((a, b) => a + b, 0), byType: d.messages,
        active: d.activeUsers, peak: d.peakConnections }));
      page().replaceChildren(
        el("h2", { text: "Statistics of " + appKey }),
        el("div", { class: "row" }, el("label", {}, "Days ", el("select", { id: "stat-days", onchange: e => { localStorage.setItem("imconsole.days", e.target.value); statisticsPage(); } },
          [7, 30, 90, 400].map(n => el("option", { value: n, selected: n === days }, String(n)))))),
        el("h3", { text: "Messages per day" }), chart("chart-messages", rows, r => r.messages),
        el("h3", { text: "Active users per day" }), chart("chart-active", rows, r => r.active),
        el("h3", { text: "Peak connections per day" }), chart("chart-peak", rows, r => r.peak),
        table("stats-table", ["day", "messages", "by type", "active users", "peak connections"], rows.map(r => [r.day, r.messages,
          Object.entries(r.byType).map(([t, n]) => (TYPES[t] || t) + " " + n).join(", "), r.active, r.peak])));
    }

    /// A bar chart, one bar per day, drawn as SVG.
    function chart(id, rows, pick) {
      const ns = "http://www.w3.org/2000/svg";
      const svg = document.createElementNS(ns, "svg");
      svg.setAttribute("id", id);
      svg.setAttribute("class", "chart");
      svg.setAttribute("viewBox", "0 0 600 180");
      svg.setAttribute("preserveAspectRatio", "none");
      const max = Math.max(1, ...rows.map(pick));
      const width = 600 / Math.max(rows.length, 1);
      rows.forEach((row, index) => {
        const height = Math.round(150 * pick(row) / max);
        const bar = document.createElementNS(ns, "rect");
        bar.setAttribute("x", index * width + 1);
        bar.setAttribute("y", 160 - height);
        bar.setAttribute("width", Math.max(width - 2, 1));
        bar.setAttribute("height", height);
        const title = document.createElementNS(ns, "title");
        title.textContent = row.day + ": " + pick(row);
        bar.append(title);
        svg.append(bar);
        const label = document.createElementNS(ns, "text");
        label.setAttribute("x", index * width + 2);
        label.setAttribute("y", 175);
        label.textContent = rows.length <= 10 || index % Math.ceil(rows.length / 10) === 0 ? row.day.slice(5) : "";
        svg.append(label);
      });
      const top = document.createElementNS(ns, "text");
      top.setAttribute("x", 2);
      top.setAttribute("y", 9);
      top.textContent = "max " + max;
      svg.append(top);
      return svg;
    }

    function accountPage() {
      page().replaceChildren(
        el("h2", { text: "Account" }),
        el("section", {}, el("h3", { text: "Change the password" }),
          el("div", { class: "row" }, el("input", { id: "password-current", type: "password", placeholder: "current password", autocomplete: "current-password" }),
            el("input", { id: "password-new", type: "password", placeholder: "new password (10 or more)", autocomplete: "new-password" }),
            el("button", { id: "password-change", onclick: async () => {
              const done = await act("change password", () => admin("POST", "/console/password", { current: value("password-current"), new: value("password-new") }));
              if (done) location.href = "/console/login";
            } }, "Change"))),
        el("p", { class: "doc", text: "Changing the password signs out every session." }));
    }

    const PAGES = { overview: overviewPage, apps: appsPage, settings: settingsPage, users: usersPage, groups: groupsPage, chatrooms: chatroomsPage,
      ultragroups: ultraGroupsPage, history: historyPage, words: wordsPage, statistics: statisticsPage, account: accountPage };

    // Pages are drawn one at a time, in the order asked, and only the newest of those waiting is
    // drawn: a slow page (its data still loading) can never be drawn over the one asked for after it.
    let drawing = Promise.resolve();
    let asked = 0;
    function show() {
      const ticket = ++asked;
      drawing = drawing.then(() => ticket === asked ? draw() : undefined);
      return drawing;
    }

    async function draw() {
      clearTimeout(refreshTimer);
      const name = (location.hash || "#overview").slice(1);
      if (document.body.dataset.page !== name) status("", true);
      for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("active", link.dataset.page === name);
      try {
        await (PAGES[name] || overviewPage)();
        document.body.dataset.page = name;
      } catch (error) {
        page().replaceChildren(el("p", { class: "error", id: "page-error", text: error.message + (error.code ? " (" + error.code + ")" : "") }));
      }
    }

    async function loadApps(choose) {
      apps = (await admin("GET", "/admin/apps")).apps;
      if (choose) appKey = choose;
      if (!apps.some(a => a.appKey === appKey)) appKey = apps.length ? apps[0].appKey : "";
      localStorage.setItem("imconsole.app", appKey);
      const select = document.getElementById("app-select");
      select.replaceChildren(...apps.map(a => el("option", { value: a.appKey, selected: a.appKey === appKey }, a.name + " (" + a.appKey + ")")));
    }

    document.getElementById("app-select").addEventListener("change", event => {
      appKey = event.target.value;
      localStorage.setItem("imconsole.app", appKey);
      show();
    });
    window.addEventListener("hashchange", show);
    loadApps().then(show, error => status(error.message, false));
    """#
}

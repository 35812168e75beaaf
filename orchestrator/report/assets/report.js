"use strict";
// Shows one cell's details beside the map. Every value comes from the JSON block and is written with
// textContent: log lines are data here, never markup.
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const panel = document.getElementById("detail");
  let pinned = null;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function section(title, body) {
    const frag = document.createDocumentFragment();
    frag.appendChild(el("h4", title));
    frag.appendChild(body);
    return frag;
  }

  function facts(pairs) {
    const dl = el("dl");
    for (const [name, value] of pairs) {
      if (value === null || value === undefined || value === "") continue;
      dl.appendChild(el("dt", name));
      dl.appendChild(el("dd", value));
    }
    return dl;
  }

  function probes(list) {
    const table = el("table");
    const head = table.insertRow();
    for (const name of ["probe", "", "latency", "tokens"]) head.appendChild(el("th", name));
    for (const p of list) {
      const row = table.insertRow();
      row.appendChild(el("td", p.name));
      row.appendChild(el("td", p.ok ? "ok" : "FAIL", p.ok ? "" : "bad"));
      row.appendChild(el("td", p.latency_s === null ? "–" : p.latency_s.toFixed(3) + " s"));
      row.appendChild(el("td", p.tokens === null ? "–" : p.tokens));
      if (p.error) {
        const cell = el("td", p.error, "error");
        cell.colSpan = 4;
        table.insertRow().appendChild(cell);
      }
    }
    return table;
  }

  function command(cell) {
    const env = Object.entries(cell.env || {}).map(([k, v]) => k + "=" + v + " \\\n");
    // One flag per line reads like the shell scripts people paste; "copy" still copies the command as run.
    const pre = el("pre", env.join("") + cell.command.replace(/ --/g, " \\\n  --"), "mono command");
    const copy = el("button", "copy", "copy");
    copy.type = "button";
    copy.addEventListener("click", function (event) {
      event.stopPropagation();
      const done = () => { copy.textContent = "copied"; };
      const select = () => { window.getSelection().selectAllChildren(pre); copy.textContent = "selected"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(cell.command).then(done, select);
      } else {
        select();
      }
    });
    const box = el("div");
    box.appendChild(copy);
    box.appendChild(pre);
    return box;
  }

  function show(index) {
    const cell = data.cells[index];
    panel.replaceChildren();
    panel.appendChild(el("h3", cell.label));
    const before = cell.mark && cell.mark.before;
    panel.appendChild(facts([
      ["status", cell.status],
      ["phase", cell.phase],
      ["category", cell.category],
      ["failed probe", cell.failed_probe],
      ["attempts", cell.attempts + " passed"],
      ["ready", cell.ready_s === null ? null : cell.ready_s.toFixed(1) + " s"],
      ["baseline", cell.mark ? cell.mark.kind + (before ? ": was " + before.status + " " + before.category : "") : null],
      ["run", cell.run_id],
      ["cell", cell.cell_id],
    ]));
    if (cell.root) {
      panel.appendChild(section("root cause", el("pre", cell.root, "mono root")));
    }
    if (cell.drift && cell.drift.length) {
      const changed = el("ul");
      cell.drift.forEach((line) => changed.appendChild(el("li", line, "mono")));
      panel.appendChild(section("flags the server changed (drift)", changed));
    }
    if (cell.reason && !cell.root && cell.status !== "pass") {
      panel.appendChild(section("reason", el("p", cell.reason)));
    }
    if (before && before.root && before.root !== cell.root) {
      panel.appendChild(section("root cause in the baseline", el("pre", before.root, "mono")));
    }
    if (cell.warnings.length) {
      const list = el("ul");
      for (const w of cell.warnings) list.appendChild(el("li", w));
      panel.appendChild(section("warnings (" + cell.warnings.length + ")", list));
    }
    if (cell.traceback) {
      const where = cell.traceback.line ? " (server.log line " + cell.traceback.line + ")" : "";
      const more = cell.traceback.count > 1 ? ", 1 of " + cell.traceback.count : "";
      panel.appendChild(section("traceback" + where + more, el("pre", cell.traceback.text, "mono traceback")));
    }
    if (cell.log) panel.appendChild(section("log", el("pre", cell.log, "mono log")));
    if (cell.probes.length) panel.appendChild(section("probes", probes(cell.probes)));
    if (cell.command) panel.appendChild(section("command", command(cell)));
    if (cell.run_id && cell.status !== "pass") {
      panel.appendChild(section("report it", el("pre", "orchestrator bugreport " + cell.run_id, "mono")));
    }
  }

  function pin(node) {
    if (pinned) pinned.classList.remove("pinned");
    pinned = pinned === node ? null : node;
    if (pinned) pinned.classList.add("pinned");
  }

  for (const node of document.querySelectorAll("[data-cell]")) {
    const index = Number(node.dataset.cell);
    node.addEventListener("mouseenter", () => { if (!pinned) show(index); });
    node.addEventListener("focus", () => { if (!pinned) show(index); });
    node.addEventListener("click", () => { pin(node); show(index); });
  }
  document.addEventListener("keydown", (event) => { if (event.key === "Escape" && pinned) pin(pinned); });

  // Hovering a legend entry or a failure group dims every cell it does not cover.
  for (const node of document.querySelectorAll("[data-focus]")) {
    const key = node.dataset.focus;
    node.addEventListener("mouseenter", () => {
      for (const cell of document.querySelectorAll("button.cell")) {
        cell.classList.toggle("hit", cell.dataset.keys.split(" ").includes(key));
      }
      document.body.classList.add("focusing");
    });
    node.addEventListener("mouseleave", () => document.body.classList.remove("focusing"));
  }
})();

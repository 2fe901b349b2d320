// flightdeck's web view: the fleet and each cluster, read from the daemon's API with a
// bearer token kept in this tab's session storage (never in a URL, a cookie or a log).
// Built with DOM calls only (no innerHTML), so no text from the API is ever markup.
'use strict';

const TOKEN_KEY = 'flightdeck-token';
const SVG_NS = 'http://www.w3.org/2000/svg';
// The timeline's rows, in the order drawn.
const ROWS = ['actions', 'repairs', 'conditions', 'other'];
const CONDITION_KINDS = new Set([
  'LoadBalancerMemberStuck', 'MachineFailed', 'LoadBalancerFailed', 'LoadBalancerHeldUp',
  'RolloutHalted', 'CloudError', 'ObjectNotListed', 'ObservationSuspect', 'MemberAddressBusy',
  'ReconcileLoopDetected', 'RemediationPaused', 'Remediating', 'RouteLimitReached',
  'RouterNotFound', 'ForeignObjects', 'DeletionUnconfirmed', 'NewMachinesHeld', 'PlanRejected',
]);
const EVENTS_KEPT = 2000;

const state = { token: null, role: null, view: null };

// ---------------------------------------------------------------- DOM helpers

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  return fill(e, attrs, kids);
}

function s(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG_NS, tag);
  return fill(e, attrs, kids);
}

function fill(e, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

function main() { return document.getElementById('main'); }

// Replaces an element's children, skipping the absent ones (`replaceChildren` would
// write "null").
function put(e, ...kids) {
  e.replaceChildren();
  return fill(e, {}, kids);
}

function toast(message) {
  const t = document.getElementById('toast');
  t.textContent = message;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 8000);
}

function setLive(text) { document.getElementById('live').textContent = text; }

// ---------------------------------------------------------------- formatting

function age(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return '-';
  const sec = Math.max(0, Math.floor(ms / 1000));
  if (sec < 120) return `${sec}s`;
  const min = Math.floor(sec / 60);
  if (min < 120) return `${min}m`;
  const hr = Math.floor(min / 60);
  if (hr < 48) return `${hr}h${min % 60 ? `${min % 60}m` : ''}`;
  return `${Math.floor(hr / 24)}d`;
}

function clock(ms) {
  const d = new Date(ms);
  return d.toISOString().slice(11, 19);
}

function phaseBadge(phase, ready) {
  const kind = ready ? 'ok' : phase === 'Failed' ? 'bad' : phase === 'Deleting' ? 'muted' : 'warn';
  return h('span', { class: `badge ${kind}`, text: phase });
}

function setText(c) { return `${c.ready}/${c.desired}`; }

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (options.json !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, {
    method: options.method || 'GET',
    headers,
    body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
    cache: 'no-store',
  });
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
  if (!r.ok) {
    const why = (body && body.error) || text || r.statusText;
    if (r.status === 401 && !options.login) signOut(`Signed out: ${why}`);
    throw new ApiError(r.status, why);
  }
  return body;
}

// Follows a server-sent event stream with the token in a header (EventSource cannot send
// one). Calls `onEvent` with each parsed event; reconnects after a drop until `stop`.
function follow(path, onEvent, onState) {
  const ctl = new AbortController();
  let stopped = false;
  const run = async () => {
    while (!stopped) {
      try {
        const r = await fetch(path, {
          headers: { Authorization: `Bearer ${state.token}`, Accept: 'text/event-stream' },
          signal: ctl.signal,
          cache: 'no-store',
        });
        if (r.status === 401) { signOut('Signed out: the token was refused'); return; }
        if (!r.ok || !r.body) throw new Error(`events: HTTP ${r.status}`);
        onState('live');
        const reader = r.body.getReader();
        const decoder = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).trimStart()).join('\n');
            if (data) {
              try { onEvent(JSON.parse(data)); } catch (_) { /* a malformed event is skipped */ }
            }
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      if (stopped) return;
      onState('reconnecting');
      await new Promise((res) => setTimeout(res, 2000));
    }
  };
  run();
  return () => { stopped = true; ctl.abort(); };
}

// ---------------------------------------------------------------- sign in and out

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.role = null;
  stopView();
  document.getElementById('who').hidden = true;
  showLogin(message);
}

function showLogin(message) {
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'current-password',
    required: true, spellcheck: 'false', 'aria-describedby': 'token-help',
  });
  const error = h('p', { id: 'login-error', class: 'error', role: 'alert', text: message || '' });
  const form = h('form', { class: 'login', id: 'login-form' },
    h('h1', { text: 'Sign in to flightdeck' }),
    h('label', { for: 'token', text: 'Bearer token' }),
    input,
    h('p', { id: 'token-help', class: 'help' },
      'The admin token is in the daemon\'s state directory (', h('code', { text: 'admin.token' }),
      '); a viewer token (', h('code', { text: 'viewer.token' }), ') may only look.'),
    h('button', { type: 'submit', id: 'login-submit', text: 'Sign in' }),
    error);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    state.token = input.value.trim();
    try {
      const who = await api('/api/v1/whoami', { login: true });
      sessionStorage.setItem(TOKEN_KEY, state.token);
      signedIn(who.role);
    } catch (e) {
      state.token = null;
      error.textContent = e.status === 401 ? 'That token is not one of this flightdeck\'s tokens.' : `Cannot sign in: ${e.message}`;
      input.focus();
    }
  });
  put(main(), form);
  input.focus();
}

function signedIn(role) {
  state.role = role;
  const badge = document.getElementById('role');
  badge.textContent = role;
  badge.className = `badge ${role === 'admin' ? 'warn' : 'muted'}`;
  badge.setAttribute('title', role === 'admin' ? 'may look and change' : 'may only look');
  document.getElementById('who').hidden = false;
  route();
}

// ---------------------------------------------------------------- views

function stopView() {
  if (state.view) state.view.stop();
  state.view = null;
}

function route() {
  if (!state.token) return;
  stopView();
  const hash = decodeURIComponent(location.hash || '#/');
  const m = hash.match(/^#\/cluster\/(.+)$/);
  state.view = m ? clusterView(m[1]) : fleetView();
  main().focus({ preventScroll: true });
}

// Runs `load` now, after each followed event (at most every 500 ms), and every 10 s.
function refresher(load) {
  let timer = null;
  let stopped = false;
  const kick = () => {
    if (timer || stopped) return;
    timer = setTimeout(async () => {
      timer = null;
      if (!stopped) await load().catch((e) => toast(e.message));
    }, 500);
  };
  const poll = setInterval(kick, 10000);
  load().catch((e) => toast(e.message));
  return { kick, stop: () => { stopped = true; clearInterval(poll); clearTimeout(timer); } };
}

function trouble(c) {
  let t = 0;
  if (c.breakers.length) t += 1000;
  if (c.phase === 'Failed') t += 500;
  if (c.lastError) t += 200;
  if (!c.ready && c.phase !== 'Deleting') t += 100;
  return t + c.conditions.length * 10 + c.repairs;
}

function fleetView() {
  const counts = h('p', { class: 'counts', id: 'fleet-counts', 'aria-live': 'polite' });
  const body = h('div', { class: 'scroll' });
  put(main(), h('h1', { text: 'Fleet' }), counts, body);
  document.title = 'Fleet · flightdeck';
  // The table is drawn again only when what it shows changed: a redraw on every refresh
  // would take the row from under a pointer about to click it.
  let shown = null;
  const load = async () => {
    const list = await api('/api/v1/clusters');
    const items = list.items.slice().sort((a, b) => trouble(b) - trouble(a) || a.name.localeCompare(b.name));
    const ready = items.filter((c) => c.ready).length;
    counts.textContent = `${items.length} cluster(s): ${ready} ready, ${items.length - ready} not ready, ${items.filter((c) => c.breakers.length).length} with an open churn breaker`;
    const drawn = JSON.stringify(items.map((c) => [c.name, c.cloud, c.phase, c.ready, c.lastError,
      c.controlPlane, c.pools, c.conditions, c.breakers, c.repairs]));
    if (drawn === shown) return;
    shown = drawn;
    if (!items.length) {
      put(body, h('p', { class: 'empty', text: 'No clusters yet. Apply one with flightdeck apply -f cluster.yaml.' }));
      return;
    }
    put(body, h('table', { class: 'fleet', id: 'fleet-table' },
      h('caption', { text: 'Clusters, trouble first' }),
      h('thead', {}, h('tr', {}, ['Cluster', 'Cloud', 'Phase', 'Control plane', 'Pools', 'Conditions', 'Churn breakers', 'Repairs']
        .map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', {}, items.map((c) => h('tr', {
        class: trouble(c) > 0 ? 'trouble' : null, 'data-cluster': c.name, 'data-phase': c.phase,
      },
      h('th', { scope: 'row' }, h('a', { href: `#/cluster/${encodeURIComponent(c.name)}`, text: c.name })),
      h('td', { 'data-label': 'Cloud', text: c.cloud }),
      h('td', { 'data-label': 'Phase' }, phaseBadge(c.phase, c.ready), c.lastError ? h('span', { class: 'note', text: ` ${c.lastError}` }) : null),
      h('td', { 'data-label': 'Control plane', text: `${setText(c.controlPlane)} ready` }),
      h('td', { 'data-label': 'Pools', text: c.pools.map((p) => `${p.name} ${setText(p)}`).join(', ') || '-' }),
      h('td', { 'data-label': 'Conditions' }, c.conditions.length ? c.conditions.map((k) => h('span', { class: 'badge warn', text: k })) : '-'),
      h('td', { 'data-label': 'Churn breakers' }, c.breakers.length ? c.breakers.map((k) => h('span', { class: 'badge bad', text: k })) : '-'),
      h('td', { 'data-label': 'Repairs', text: String(c.repairs) }))))));
  };
  const r = refresher(load);
  const unfollow = follow('/api/v1/events?follow=true&limit=0', () => r.kick(), setLive);
  return { stop: () => { r.stop(); unfollow(); } };
}

function clusterView(name) {
  const v = { detail: null, plan: null, sim: null, events: [], seen: new Set() };
  const head = h('div', { class: 'cluster-head' });
  const tree = h('section', { 'aria-labelledby': 'tree-title' });
  const repairs = h('section', { 'aria-labelledby': 'repairs-title' });
  const held = h('section', { 'aria-labelledby': 'held-title' });
  const timeline = h('section', { 'aria-labelledby': 'timeline-title', id: 'timeline-section' });
  const simPanel = h('section', { 'aria-labelledby': 'sim-title', id: 'sim-panel', hidden: true });
  put(main(), 
    h('p', { class: 'crumbs' }, h('a', { href: '#/', text: 'Fleet' }), ' / ', name),
    head, h('div', { class: 'grid' }, tree, h('div', {}, repairs, held)), timeline, simPanel);
  document.title = `${name} · flightdeck`;

  const load = async () => {
    try {
      v.detail = await api(`/api/v1/clusters/${encodeURIComponent(name)}`);
      // The API's detail is the summary's fields with spec, status and memory beside.
      v.detail.summary = v.detail;
    } catch (e) {
      if (e.status === 404) {
        put(head, h('h1', { text: name }), h('p', { class: 'error', text: `No cluster ${name}: ${e.message}` }));
        return;
      }
      throw e;
    }
    v.plan = await api(`/api/v1/clusters/${encodeURIComponent(name)}/plan`).catch(() => null);
    if (v.sim === null) {
      v.sim = await api('/api/v1/sim/faults').catch(() => false);
    } else if (v.sim) {
      v.sim = await api('/api/v1/sim/faults').catch(() => v.sim);
    }
    drawHead(head, v, () => r.kick());
    drawTree(tree, v.detail);
    drawRepairs(repairs, v.detail, v.plan);
    drawHeld(held, v.detail);
    drawTimeline(timeline, v);
    drawSim(simPanel, v, name, () => r.kick());
  };
  const r = refresher(load);
  const onEvent = (e) => {
    const key = `${e.at}|${e.reason}|${e.message}`;
    if (v.seen.has(key)) return;
    v.seen.add(key);
    v.events.push(e);
    if (v.events.length > EVENTS_KEPT) v.events.splice(0, v.events.length - EVENTS_KEPT);
    if (v.detail) drawTimeline(timeline, v);
    r.kick();
  };
  const unfollow = follow(`/api/v1/clusters/${encodeURIComponent(name)}/events?follow=true&limit=1000`, onEvent, setLive);
  return { stop: () => { r.stop(); unfollow(); } };
}

function drawHead(head, v, reload) {
  const c = v.detail.summary;
  const admin = state.role === 'admin';
  const act = async (label, method, path, confirmText) => {
    if (confirmText && !window.confirm(confirmText)) return;
    try {
      await api(path, { method });
      toast(`${label}: done`);
      reload();
    } catch (e) { toast(`${label}: ${e.message}`); }
  };
  const enc = encodeURIComponent(c.name);
  put(head, 
    h('h1', {}, c.name, ' ', phaseBadge(c.phase, c.ready)),
    h('dl', { class: 'facts' },
      h('dt', { text: 'Cloud' }), h('dd', { text: c.cloud }),
      h('dt', { text: 'Endpoint' }), h('dd', { text: c.endpoint || 'not yet known' }),
      h('dt', { text: 'Age' }), h('dd', { text: age(c.createdAt ? c.now - c.createdAt : null) }),
      h('dt', { text: 'Generation' }), h('dd', { text: `${c.observedGeneration} of ${c.generation} reconciled` }),
      h('dt', { text: 'Control plane' }), h('dd', { text: `${setText(c.controlPlane)} ready, ${c.controlPlane.upToDate} up to date` }),
      c.lastError ? [h('dt', { text: 'Last error' }), h('dd', { class: 'error', text: c.lastError })] : null),
    h('div', { class: 'actions' },
      h('button', {
        type: 'button', id: 'resume', disabled: !admin, 'aria-describedby': admin ? null : 'viewer-note',
        onclick: () => act('Resume', 'POST', `/api/v1/clusters/${enc}/resume`),
        text: 'Resume (reset breakers)',
      }),
      h('button', {
        type: 'button', id: 'delete', class: 'danger', disabled: !admin, 'aria-describedby': admin ? null : 'viewer-note',
        onclick: () => act('Delete', 'DELETE', `/api/v1/clusters/${enc}`, `Delete cluster ${c.name} and everything it owns in the cloud?`),
        text: 'Delete cluster',
      }),
      admin ? null : h('span', { id: 'viewer-note', class: 'note', text: 'Signed in as a viewer: you may look, not change.' })),
    conditionsList(v.detail));
}

function conditionsList(d) {
  const conds = ((d.status && d.status.conditions) || []).filter((x) => x.status && x.type !== 'Ready');
  if (!conds.length) return h('p', { class: 'ok-line', text: 'No active conditions.' });
  return h('ul', { class: 'conditions', id: 'conditions', 'aria-label': 'Active conditions' },
    conds.map((x) => h('li', {}, h('span', { class: 'badge warn', text: x.type }), ` ${x.reason}: ${x.message || ''}`,
      h('span', { class: 'note', text: x.since ? ` (since ${age(d.summary.now - x.since)} ago)` : '' }))));
}

function memberText(m) { return m ? `${m.provisioningStatus}/${m.operatingStatus}` : '-'; }

function instanceWord(cloud) {
  const kind = cloud.replace(/^sim\//, '').split(':')[0];
  return kind === 'opennebula' ? 'VM' : kind === 'kubevirt' ? 'VMI' : 'Server';
}

// Only OpenStack puts the control plane behind a load balancer with members
// (OpenNebula's and KubeVirt's endpoints have none): elsewhere no Member line is drawn.
function hasMembers(cloud) {
  return cloud.replace(/^sim\//, '').split(':')[0] === 'openstack';
}

function drawTree(section, d) {
  const c = d.summary;
  const st = d.status || {};
  const machines = (d.memory && d.memory.machines) || {};
  const word = instanceWord(c.cloud);
  const born = (name) => {
    const rec = machines[name];
    const at = rec && (rec.created_at || rec.createdAt);
    return at ? age(c.now - at) : '-';
  };
  const leaf = (label, status, details) => h('li', {},
    h('span', { class: 'label', text: label }), ' ', h('span', { class: `st ${statusClass(status)}`, text: status }),
    details ? h('span', { class: 'note', text: ` ${details}` }) : null);
  const drainText = (d, now) => {
    if (d.held) return 'flightdeck.dev/hold-deletion on its node holds the deletion';
    const left = d.podsLeft == null ? 'pods not listed yet' : `${d.podsLeft} pod(s) left`;
    const deadline = d.deadline == null ? '' : (d.deadline > now ? `deadline in ${age(d.deadline - now)}` : 'deadline passed');
    return [left, deadline].filter(Boolean).join(', ');
  };
  const machine = (m, members) => h('li', { 'data-machine': m.name },
    h('span', { class: 'label', text: `Machine/${m.name}` }), ' ',
    h('span', { class: `st ${m.upToDate ? 'ok' : 'warn'}`, text: (m.upToDate ? 'up to date' : 'outdated') + (m.removing ? ', removing' : '') }),
    h('span', { class: 'note', text: ` ${m.version || ''} ${m.image ? `image ${m.image}` : ''} · age ${born(m.name)}` }),
    h('ul', {},
      leaf(word, m.serverStatus, [m.serverId ? `id ${m.serverId}` : 'not created yet', m.address ? `address ${m.address}` : ''].filter(Boolean).join(', ')),
      leaf('Node', m.node || '-', m.node ? '' : 'not joined yet'),
      m.drain ? leaf('Drain', m.drain.held ? 'held' : 'draining', drainText(m.drain, c.now)) : null,
      members || m.member ? leaf('Member', memberText(m.member), m.member ? `id ${m.member.id}` : 'not a load balancer member yet') : null));
  const set = (label, count, s, members) => h('li', {},
    h('span', { class: 'label', text: label }), ' ',
    h('span', { class: `st ${count && count.ready >= count.desired ? 'ok' : 'warn'}`, text: count ? `${setText(count)} ready` : '-' }),
    h('ul', {}, ((s && s.machines) || []).map((m) => machine(m, members))));
  const lb = st.loadBalancer;
  put(section, 
    h('h2', { id: 'tree-title', text: 'Machines' }),
    h('ul', { class: 'tree', id: 'tree' },
      h('li', {}, h('span', { class: 'label', text: `Cluster/${c.name}` }), ' ', phaseBadge(c.phase, c.ready),
        h('ul', {},
          lb ? leaf('LoadBalancer', `${lb.provisioningStatus}/${lb.operatingStatus}`, `id ${lb.id}${lb.vipAddress ? `, vip ${lb.vipAddress}` : ''}`) : null,
          set(`ControlPlane/${(st.controlPlane && st.controlPlane.name) || c.controlPlane.name}`, c.controlPlane, st.controlPlane, hasMembers(c.cloud)),
          c.pools.map((p) => set(`NodePool/${p.name}`, p, (st.nodePools || []).find((x) => x.name === p.name), false))))));
}

function statusClass(t) {
  if (/ACTIVE\/(ONLINE|NO_MONITOR)|^Ready$|^ACTIVE$|RUNNING|Running/.test(t)) return 'ok';
  if (/ERROR|FAILED|Failed|OFFLINE|NotReady/.test(t)) return 'bad';
  return 'warn';
}

function drawRepairs(section, d, plan) {
  const st = d.status || {};
  const budgets = (plan && plan.repairBudgets) || st.repairBudgets || [];
  const list = (plan && plan.repairs) || st.repairs || [];
  const breakers = d.summary.breakers;
  put(section, 
    h('h2', { id: 'repairs-title', text: 'Repairs' }),
    budgets.length ? h('table', { class: 'small', id: 'budgets' },
      h('caption', { text: 'Repair budgets (maxUnhealthy) in use' }),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Set' }), h('th', { scope: 'col', text: 'In use' }), h('th', { scope: 'col', text: 'Budget' }))),
      h('tbody', {}, budgets.map((b) => h('tr', { class: b.inUse >= b.budget && b.budget > 0 ? 'trouble' : null },
        h('th', { scope: 'row', text: b.set }), h('td', { text: String(b.inUse) }), h('td', { text: String(b.budget) }))))) : h('p', { class: 'note', text: 'No repair budgets reported yet.' }),
    list.length ? h('ul', { id: 'repairs', 'aria-label': 'Repairs' }, list.map((x) => h('li', {},
      h('strong', { text: x.machine }), `: ${x.reason} `, h('span', { class: 'badge warn', text: x.state })))) : h('p', { class: 'ok-line', text: 'No repair running.' }),
    breakers.length ? h('p', { class: 'error' }, 'Open churn breakers: ', breakers.join(', '), '. Resume the cluster once the cause is fixed.') : null);
}

function drawHeld(section, d) {
  const mem = d.memory || {};
  const routes = mem.routes || [];
  const one = mem.one || {};
  const holdings = [];
  for (const [what, map] of [['template', one.templates], ['image', one.images]]) {
    for (const [nameOf, held] of Object.entries(map || {})) {
      holdings.push(`${what} ${nameOf}${held.id ? ` (id ${held.id})` : ''}${held.created ? ', registered by flightdeck' : ', an operator\'s'}${held.deleting ? ', being deleted' : ''}`);
    }
  }
  put(section, 
    h('h2', { id: 'held-title', text: 'Routes and templates held' }),
    h('h3', { text: `Routes (${routes.length})` }),
    routes.length ? h('ul', { id: 'routes', class: 'mono' }, routes.map((r) => h('li', { text: `${r.destination} via ${r.nexthop}` }))) : h('p', { class: 'note', text: 'No routes on a shared router.' }),
    h('h3', { text: `Templates and images (${holdings.length})` }),
    holdings.length ? h('ul', { id: 'templates', class: 'mono' }, holdings.map((x) => h('li', { text: x }))) : h('p', { class: 'note', text: 'None held.' }));
}

function rowOf(e) {
  if (CONDITION_KINDS.has(e.reason) || (e.reason.endsWith('Resolved') && CONDITION_KINDS.has(e.reason.slice(0, -8)))) {
    return e.reason === 'Remediating' || e.reason === 'MachineFailed' ? 'repairs' : 'conditions';
  }
  if (/^(Remediation|MachineFailed|MachineRemov|MachineAdopted|Drain|GuestDrain|EvictPod|CordonNode|UncordonNode)/.test(e.reason)) return 'repairs';
  if (/^(Create|Delete|Add|Remove|Update)[A-Z]/.test(e.reason)) return 'actions';
  return 'other';
}

// Condition spans: from the event that raised a condition to its `…Resolved` (or now).
function spans(events, now) {
  const open = new Map();
  const out = [];
  for (const e of events) {
    if (CONDITION_KINDS.has(e.reason) && e.severity === 'Warning') {
      if (!open.has(e.reason)) open.set(e.reason, e.at);
    } else if (e.reason.endsWith('Resolved')) {
      const kind = e.reason.slice(0, -8);
      if (open.has(kind)) { out.push({ kind, from: open.get(kind), to: e.at }); open.delete(kind); }
    }
  }
  for (const [kind, from] of open) out.push({ kind, from, to: now, open: true });
  return out;
}

function drawTimeline(section, v) {
  const now = v.detail.summary.now;
  const events = v.events.slice().sort((a, b) => a.at - b.at);
  const first = events.length ? events[0].at : now - 60000;
  const from = Math.max(first, now - 3600 * 1000);
  const to = Math.max(now, from + 1000);
  const W = 1000; const left = 90; const right = 10; const rowH = 26; const top = 8;
  const H = top + ROWS.length * rowH + 26;
  const x = (t) => left + ((t - from) / (to - from)) * (W - left - right);
  const y = (row) => top + ROWS.indexOf(row) * rowH + rowH / 2;
  const shown = events.filter((e) => e.at >= from);
  const chart = s('svg', {
    id: 'timeline', viewBox: `0 0 ${W} ${H}`, role: 'img', preserveAspectRatio: 'none',
    'aria-label': `Timeline of the last ${age(to - from)}: ${shown.length} event(s)`,
  });
  for (const row of ROWS) {
    chart.append(s('line', { x1: left, x2: W - right, y1: y(row), y2: y(row), class: 'lane' }));
    chart.append(s('text', { x: 4, y: y(row) + 4, class: 'lane-label' }, row));
  }
  for (const sp of spans(events, now).filter((x) => x.to >= from)) {
    const x1 = x(Math.max(sp.from, from));
    chart.append(s('rect', {
      x: x1, y: y('conditions') - 7, width: Math.max(2, x(sp.to) - x1), height: 14,
      class: `span${sp.open ? ' open' : ''}`, 'data-condition': sp.kind,
    }, s('title', {}, `${sp.kind}: ${clock(sp.from)}–${sp.open ? 'now' : clock(sp.to)}`)));
  }
  for (const e of shown) {
    const row = rowOf(e);
    chart.append(s('circle', {
      cx: x(e.at), cy: y(row), r: 4, class: `mark ${row} ${e.severity === 'Warning' ? 'warning' : ''}`,
      'data-reason': e.reason, 'data-row': row,
    }, s('title', {}, `${clock(e.at)} ${e.reason}: ${e.message}`)));
  }
  const ticks = 6;
  for (let i = 0; i <= ticks; i++) {
    const t = from + ((to - from) * i) / ticks;
    chart.append(s('text', { x: x(t), y: H - 6, class: 'tick', 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' }, clock(t)));
  }
  const recent = shown.slice(-25).reverse();
  put(section, 
    h('h2', { id: 'timeline-title', text: 'Timeline' }),
    h('p', { class: 'note', text: 'Actions on the cloud, repairs and conditions (bars from start to end) over the last hour, live. Times on the cluster\'s clock.' }),
    h('div', { class: 'chart' }, chart),
    h('div', { class: 'scroll' }, h('table', { class: 'small events', id: 'events' },
      h('caption', { text: 'Latest events' }),
      h('thead', {}, h('tr', {}, ['Time', 'Kind', 'Reason', 'Message'].map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', {}, recent.map((e) => h('tr', { class: e.severity === 'Warning' ? 'warning' : null, 'data-reason': e.reason },
        h('td', { text: clock(e.at) }), h('td', { text: rowOf(e) }), h('td', { text: e.reason }), h('td', { text: e.message })))))));
}

function drawSim(section, v, name, reload) {
  const cloud = v.detail.summary.cloud;
  if (!v.sim || !cloud.startsWith('sim/')) { section.hidden = true; return; }
  section.hidden = false;
  // The form is drawn once per cluster, role and list of kinds: redrawing it on every
  // refresh would lose a person's choices under their fingers (and hand a script that
  // holds one of its controls a detached element).
  const drawn = `${name}\n${state.role}\n${v.sim.kinds.join(',')}`;
  if (section.dataset.drawn === drawn) {
    drawActiveFaults(section, v, name);
    return;
  }
  section.dataset.drawn = drawn;
  const admin = state.role === 'admin';
  const kind = h('select', { id: 'fault-kind', name: 'kind', disabled: !admin },
    v.sim.kinds.map((k) => h('option', { value: k, text: k })));
  const duration = h('input', { id: 'fault-duration', name: 'duration', value: '5m', size: 6, disabled: !admin, 'aria-describedby': 'fault-help' });
  const count = h('input', { id: 'fault-count', name: 'count', type: 'number', min: 1, max: 100, placeholder: 'default', disabled: !admin });
  const form = h('form', { id: 'fault-form', class: 'fault-form' },
    h('label', { for: 'fault-kind', text: 'Fault kind' }), kind,
    h('label', { for: 'fault-duration', text: 'Duration' }), duration,
    h('label', { for: 'fault-count', text: 'Count' }), count,
    h('button', { type: 'submit', id: 'fault-start', disabled: !admin, text: 'Start fault' }),
    h('p', { id: 'fault-help', class: 'help', text: admin ? `Breaks the simulated cloud under ${name} from now on, then watch the repair in the timeline.` : 'Signed in as a viewer: only an admin may break the simulator.' }));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const req = { kind: kind.value, cluster: name, duration: duration.value.trim() || undefined };
    if (count.value) req.count = Number(count.value);
    try {
      const f = await api('/api/v1/sim/faults', { method: 'POST', json: req });
      toast(`Fault ${f.kind} started on ${f.cluster}`);
      reload();
    } catch (e) { toast(`Fault not started: ${e.message}`); }
  });
  put(section, h('h2', { id: 'sim-title', text: 'Simulator' }), form, h('div', { id: 'faults-active' }));
  drawActiveFaults(section, v, name);
}

function drawActiveFaults(section, v, name) {
  const box = section.querySelector('#faults-active');
  const now = v.detail.summary.now;
  const mine = v.sim.active.filter((f) => f.cluster === name && (!f.end || f.end > now));
  put(box, mine.length
    ? h('ul', { 'aria-label': 'Faults active on this cluster' }, mine.map((f) => h('li', {},
      h('span', { class: 'badge bad', text: f.kind }), ` since ${clock(f.start)}${f.end ? `, until ${clock(f.end)}` : ''}`)))
    : h('p', { class: 'note', text: 'No fault active on this cluster.' }));
}

// ---------------------------------------------------------------- start

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('logout').addEventListener('click', () => signOut('Signed out.'));
  state.token = sessionStorage.getItem(TOKEN_KEY);
  if (!state.token) { showLogin(); return; }
  api('/api/v1/whoami', { login: true })
    .then((who) => signedIn(who.role))
    .catch(() => signOut('Your session ended; sign in again.'));
});

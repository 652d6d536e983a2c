// Drives termd-mcp with the official TypeScript MCP SDK client, for
// mcpbridge/ts_test.go. Protocol 2025-11-25 uses @modelcontextprotocol/sdk
// (v1); 2026-07-28 uses its v2 client package, pinned to that revision.
// Each step prints one JSON line; before executing a plan that needs
// approval it prints {"step":"approve"} and waits for a line on stdin.
import { createInterface } from 'node:readline';

const { TRANSPORT, PROTO, BIN, SOCKET, URL: ENDPOINT, TOKEN, WORKSPACE } = process.env;
const modern = PROTO >= '2026-07-28';
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

let Client, Stdio, HTTP;
if (modern) {
  ({ Client, StreamableHTTPClientTransport: HTTP } = await import('@modelcontextprotocol/client'));
  ({ StdioClientTransport: Stdio } = await import('@modelcontextprotocol/client/stdio'));
} else {
  ({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
  ({ StdioClientTransport: Stdio } = await import('@modelcontextprotocol/sdk/client/stdio.js'));
  ({ StreamableHTTPClientTransport: HTTP } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js'));
}

const opts = modern ? { versionNegotiation: { mode: { pin: PROTO } } } : {};
const newClient = () => new Client({ name: 'termd-ts-e2e', version: '1.0.0' }, opts);
const newTransport = () => TRANSPORT === 'stdio'
  ? new Stdio({ command: BIN, args: [], env: { PATH: process.env.PATH, HOME: '/tmp', TERMD_SOCKET: SOCKET }, cwd: WORKSPACE, stderr: 'inherit' })
  : new HTTP(new URL(ENDPOINT), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
const client = newClient();
const transport = newTransport();

try {
  await client.connect(transport);
} catch (e) {
  out({ step: 'connect', error: String(e && e.message || e) });
  process.exit(0);
}
out({ step: 'connect', version: client.getNegotiatedProtocolVersion ? client.getNegotiatedProtocolVersion() : (transport.protocolVersion || PROTO), instructions: client.getInstructions ? client.getInstructions() : '' });

const callOn = async (c, name, args, progress, signal) => {
  const seen = [];
  const o = progress || signal ? { signal, onprogress: progress ? (p) => seen.push(p.message || '') : undefined } : undefined;
  const r = modern ? await c.callTool({ name, arguments: args }, o) : await c.callTool({ name, arguments: args }, undefined, o);
  return { isError: !!r.isError, sc: r.structuredContent || {}, progress: seen, text: (r.content || []).map((c) => c.text || '').join('\n'), links: (r.content || []).filter((c) => c.type === 'resource_link').map((c) => c.uri) };
};
const call = (name, args, progress) => callOn(client, name, args, progress);

try {
const tools = await client.listTools();
out({ step: 'tools', names: tools.tools.map((t) => t.name), annotations: Object.fromEntries(tools.tools.map((t) => [t.name, t.annotations || {}])) });

let r = await call('terminal_plan', { argv: ['pwd'] });
out({ step: 'plan_pwd', ...r });
r = await call('terminal_execute', { plan_id: r.sc.plan_id }, true);
out({ step: 'execute_pwd', ...r });
// One call: planned and, being allowed, run (its result is checked
// against terminal_run's output schema by the SDK).
r = await call('terminal_run', { argv: ['pwd'] });
out({ step: 'run_pwd', ...r });

r = await call('terminal_plan', { argv: ['sudo', 'ls'] });
out({ step: 'plan_sudo', ...r });

r = await call('terminal_plan', { argv: ['sleep', '3'] });
r = await call('terminal_execute', { plan_id: r.sc.plan_id, wait_seconds: 1 });
out({ step: 'execute_sleep', ...r });
const id = r.sc.execution_id;
for (let i = 0; i < 200; i++) {
  r = await call('terminal_status', { execution_id: id });
  if (r.sc.done) break;
  await new Promise((res) => setTimeout(res, 300));
}
out({ step: 'status_sleep', ...r });

r = await call('terminal_plan', { argv: ['touch', `ts-${TRANSPORT}-${PROTO}`] });
out({ step: 'approve', ...r });
await lines.next(); // the operator has approved
r = await call('terminal_execute', { plan_id: r.sc.plan_id });
out({ step: 'execute_touch', ...r });

// Cancelling a call (AbortSignal) cancels its command: found by plan_id,
// it ends cancelled with a receipt.
r = await call('terminal_plan', { argv: ['sleep', '60'] });
const sleepPlan = r.sc.plan_id;
const abort = new AbortController();
setTimeout(() => abort.abort(), 1500);
let aborted = false;
try {
  await callOn(client, 'terminal_execute', { plan_id: sleepPlan, wait_seconds: 120 }, false, abort.signal);
} catch (e) {
  aborted = true;
}
for (let i = 0; i < 150; i++) {
  r = await call('terminal_status', { plan_id: sleepPlan });
  if (r.sc.done && r.sc.receipt_id) break;
  await new Promise((res) => setTimeout(res, 200));
}
out({ step: 'cancel', aborted, ...r });

// A second client at the same time gets its own daemon session.
const first = (await call('terminal_plan', { argv: ['true'] })).sc.session_id;
const other = newClient();
await other.connect(newTransport());
const second = (await callOn(other, 'terminal_plan', { argv: ['true'] })).sc.session_id;
await other.close();
out({ step: 'second_client', first, second });

// A python3 REPL on a terminal: the plan waits for the operator (typed
// input is code), then terminal_send types 1+1 and the screen shows 2.
r = await call('terminal_plan', { argv: ['python3'], tty: { rows: 24, cols: 80 } });
out({ step: 'approve_repl', ...r });
await lines.next();
r = await call('terminal_execute', { plan_id: r.sc.plan_id });
out({ step: 'execute_repl', ...r });
const repl = r.sc.execution_id;
r = await call('terminal_send', { execution_id: repl, line: '1+1' });
out({ step: 'repl', ...r });
r = await call('terminal_send', { execution_id: repl, keys: ['ctrl_d'] });
out({ step: 'repl_end', ...r });

const res = await client.listResources();
out({ step: 'resources', uris: res.resources.map((x) => x.uri) });
const prompts = await client.listPrompts();
out({ step: 'prompts', names: prompts.prompts.map((p) => p.name) });

await client.close();
out({ step: 'done' });
} catch (e) {
  out({ step: 'fatal', error: String(e && e.stack || e) });
}
process.exit(0);

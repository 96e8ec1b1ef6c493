// The Anthropic TypeScript SDK's tool runner (client.beta.messages.toolRunner) in a tool loop.
// The runner threads its turns by default (beta message-threads-2026-08-12): after the first
// turn it sends only the tool results with thread: {type: "continue"} (docs/agents.md).
// Usage: node drive_anthropic_sdk_js.cjs --base-url URL --model ROUTE [--api anthropic|anthropic-stream] PROMPT
// @anthropic-ai/sdk is resolved through NODE_PATH (the agents prefix's node_modules).
'use strict';

const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const { parseArgs } = require('node:util');
const sdk = require('@anthropic-ai/sdk');
const { betaTool } = require('@anthropic-ai/sdk/helpers/beta/json-schema');

const Anthropic = sdk.default || sdk.Anthropic;

const writeFile = betaTool({
  name: 'write_file',
  description: 'Write content to the file at path (creating it), and say how many bytes were written.',
  inputSchema: {
    type: 'object',
    properties: { path: { type: 'string' }, content: { type: 'string' } },
    required: ['path', 'content'],
  },
  run: ({ path, content }) => {
    fs.writeFileSync(path, content);
    return `wrote ${Buffer.byteLength(content)} bytes to ${path}`;
  },
});

const shell = betaTool({
  name: 'shell',
  description: 'Run a shell command and return what it printed (stdout and stderr).',
  inputSchema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  run: ({ command }) => {
    try {
      return execFileSync('bash', ['-lc', command], { encoding: 'utf8', timeout: 30000 }).trim();
    } catch (err) {
      return `${err.stdout || ''}${err.stderr || ''}`.trim() || `(exit ${err.status})`;
    }
  },
});

async function main() {
  const { values, positionals } = parseArgs({
    options: { 'base-url': { type: 'string' }, model: { type: 'string' }, api: { type: 'string', default: 'anthropic' } },
    allowPositionals: true,
  });
  const root = values['base-url'].replace(/\/$/, '').replace(/\/v1$/, '');
  const client = new Anthropic({ baseURL: root, apiKey: 'sk-switchyard-agent-test', maxRetries: 0 });
  const runner = client.beta.messages.toolRunner({
    model: values.model,
    max_tokens: 2048,
    system: 'You are a coding agent. Use the tools.',
    messages: [{ role: 'user', content: positionals[0] }],
    tools: [writeFile, shell],
    max_iterations: 6,
    stream: values.api === 'anthropic-stream',
  });
  const message = await runner.runUntilDone();
  const text = message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  console.log(`FINAL ANSWER: ${text}`);
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});

// memq's OpenCode plugin: the session's prompts, tool calls, summaries and ends go to memq,
// and memq's context for the project goes into the system prompt.
//
// Install: `memq install opencode`, or copy this file to ~/.config/opencode/plugin/
// (docs/agents/opencode.md). It imports only node: built-ins, so it needs nothing from npm.
// Each event is one JSON object (the fields are documented in
// worker/ingest/agents/opencode.py) POSTed to `memq agent` at $MEMQ_AGENT_URL/hooks/opencode
// (default http://127.0.0.1:$MEMQ_AGENT_PORT, port 8766), with `Authorization: Bearer
// $MEMQ_AGENT_TOKEN` when that is set. When the endpoint does not answer (or refuses the
// token), the same JSON goes to `memq hook opencode` on stdin (`memq` from OpenCode's PATH),
// which publishes it or spools it while Redis is down. Nothing here ever throws into
// OpenCode.
import { spawn } from "node:child_process";

const DEFAULT_PORT = "8766";
const POST_TIMEOUT_MS = 2000;
const CONTEXT_TIMEOUT_MS = 3000;
const COMMAND_TIMEOUT_MS = 5000;

export const MemqPlugin = async ({ directory, worktree }) => {
  const env = process.env;
  const base = env.MEMQ_AGENT_URL || `http://127.0.0.1:${env.MEMQ_AGENT_PORT || DEFAULT_PORT}`;
  const url = `${base.replace(/\/+$/, "")}/hooks/opencode`;
  const token = env.MEMQ_AGENT_TOKEN || "";
  const memq = "memq";
  const active = new Set(); // sessions with a prompt or a tool call sent: they get an `end`
  const userMessages = new Set(); // message ids of user messages (their text is not an answer)
  const lastText = new Map(); // sessionID -> the last assistant text part
  const contexts = new Map(); // sessionID -> Promise of memq's context markdown
  let queue = Promise.resolve(); // events go out one after another, in order
  let warned = false;

  // A summarize or an end has no OpenCode id: the plugin makes one, and the post and its
  // command fallback carry the same JSON, so an event delivered twice is stored once.
  const eventKey = () =>
    globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random().toString(36).slice(2)}`;

  const body = (hook, sessionID, fields = {}) =>
    JSON.stringify({ hook, session_id: sessionID, directory, worktree, ...fields });

  // The endpoint's answer ({status, text}), or null when it could not be reached in time.
  const post = async (json, timeoutMs) => {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    try {
      const res = await fetch(url, {
        method: "POST",
        headers,
        body: json,
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: res.status, text: await res.text() };
    } catch {
      return null;
    }
  };

  // `memq hook opencode` with the JSON on stdin; resolves to its stdout ("" on any failure).
  const command = (json) =>
    new Promise((resolve) => {
      let out = "";
      let child;
      try {
        // No cwd: the JSON names the directory (which may be gone, failing the spawn).
        child = spawn(memq, ["hook", "opencode"], { env, stdio: ["pipe", "pipe", "ignore"] });
      } catch (e) {
        warn(e);
        resolve("");
        return;
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), COMMAND_TIMEOUT_MS);
      child.stdout.on("data", (chunk) => (out += chunk));
      child.on("error", (e) => {
        clearTimeout(timer);
        warn(e);
        resolve("");
      });
      child.on("close", () => {
        clearTimeout(timer);
        resolve(out);
      });
      child.stdin.on("error", () => {});
      child.stdin.end(json);
    });

  const warn = (e) => {
    if (warned) return;
    warned = true;
    console.error(`memq: neither ${url} nor \`${memq} hook opencode\` took the event: ${e}`);
  };

  // The answer's text: from the endpoint, else from the command (also when the endpoint
  // refuses the token or the agent); not after a 400 or 413, which the command would repeat.
  const deliver = async (json, timeoutMs = POST_TIMEOUT_MS) => {
    const res = await post(json, timeoutMs);
    if (res?.status === 200) return res.text;
    if (res?.status === 400 || res?.status === 413) return "";
    return command(json);
  };

  const send = (hook, sessionID, fields) => {
    if (!sessionID) return queue;
    if (hook === "prompt" || hook === "tool_call") active.add(sessionID);
    const json = body(hook, sessionID, fields);
    queue = queue.then(() => deliver(json)).catch(() => {});
    return queue;
  };

  const contextOf = (sessionID) => {
    if (!contexts.has(sessionID)) {
      const asked = deliver(body("session_start", sessionID), CONTEXT_TIMEOUT_MS)
        .then((text) => JSON.parse(text || "{}")?.hookSpecificOutput?.additionalContext || "")
        .catch(() => "");
      contexts.set(sessionID, asked);
    }
    return contexts.get(sessionID);
  };

  const failedOf = (tool, output) =>
    output?.isError === true ||
    (tool === "bash" && typeof output?.metadata?.exit === "number" && output.metadata.exit !== 0);

  const outputOf = (output) => {
    if (typeof output?.output === "string") return output.output;
    if (output && "content" in output) return output.content;
    return output ?? null;
  };

  return {
    "chat.message": async (input, output) => {
      userMessages.add(output?.message?.id);
      const text = (output?.parts || [])
        .filter((p) => p?.type === "text" && !p.synthetic && !p.ignored && p.text)
        .map((p) => p.text)
        .join("\n\n");
      if (text) {
        send("prompt", input?.sessionID, { prompt: text, message_id: output?.message?.id });
      }
    },

    "tool.execute.after": async (input, output) => {
      send("tool_call", input?.sessionID, {
        tool: input?.tool,
        call_id: input?.callID,
        input: input?.args ?? null,
        output: outputOf(output),
        failed: failedOf(input?.tool, output),
      });
    },

    "experimental.chat.system.transform": async (input, output) => {
      const markdown = await contextOf(input?.sessionID || "");
      if (markdown && Array.isArray(output?.system)) output.system.push(markdown);
    },

    event: async ({ event }) => {
      const props = event?.properties || {};
      if (event?.type === "message.updated" && props.info?.role === "user") {
        userMessages.add(props.info.id);
      } else if (event?.type === "message.part.updated") {
        const part = props.part || {};
        if (part.type === "text" && part.text && !part.synthetic) {
          if (!userMessages.has(part.messageID)) lastText.set(part.sessionID, part.text);
        } else if (part.type === "tool" && part.state?.status === "error") {
          // A tool that threw: tool.execute.after does not run for it.
          send("tool_call", part.sessionID, {
            tool: part.tool,
            call_id: part.callID,
            input: part.state.input ?? null,
            output: part.state.error ?? null,
            failed: true,
          });
        }
      } else if (event?.type === "session.idle" && active.has(props.sessionID)) {
        const message = lastText.get(props.sessionID) ?? null;
        const fields = { last_assistant_message: message, event_key: eventKey() };
        send("summarize", props.sessionID, fields);
      }
    },

    dispose: async () => {
      for (const sessionID of active) {
        send("end", sessionID, { reason: "dispose", event_key: eventKey() });
      }
      active.clear();
      await queue;
    },
  };
};

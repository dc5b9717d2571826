// The Cloud-API-shaped front driven by a real Cloud API client library from npm
// (@great-detail/whatsapp, whose Client takes a base URL: prefixUrl + graphVersion), against a
// gateway process on the simulated network (issue 31, DESIGN.md section 20). It sends a text,
// an image by upload, a reply and a reaction through a linked session, reads the number's and
// the upload's records, downloads the upload, checks a refused kind's Meta error, and has the
// library's own webhook parser read and verify (X-Hub-Signature-256) the gateway's deliveries
// to a subscription of format meta. `make test-cloudfront` runs it (README, "Integrations").
//
// Environment: GATEWAY_BIN (the built gateway), CLOUDFRONT_SDK (the library's dist/index.js).

import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const bin = process.env.GATEWAY_BIN;
const sdkPath = process.env.CLOUDFRONT_SDK;
assert.ok(bin && sdkPath, "set GATEWAY_BIN and CLOUDFRONT_SDK (make test-cloudfront does)");
const { Client } = await import(pathToFileURL(sdkPath).href);

const started = Date.now();
const data = mkdtempSync(path.join(os.tmpdir(), "cloudfront-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const gw = spawn(bin, ["serve", "--addr", `127.0.0.1:${port}`, "--data", data, "--network", "sim", "--auth", "dev",
  "--webhook-allow-private", "--log-level", "error"], { stdio: ["ignore", "ignore", "pipe"] });
let stderr = ""; // the gateway's (its dev sign-in links, errors): shown when the test fails
gw.stderr.on("data", (c) => (stderr += c));
let receiver;
try {
  await main();
  console.log(`cloudfront: ok in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error(stderr);
  throw err;
} finally {
  gw.kill("SIGTERM");
  await new Promise((r) => gw.exitCode !== null ? r() : gw.once("exit", r));
  receiver?.close();
  rmSync(data, { recursive: true, force: true });
}

async function main() {
  await poll("the gateway ready", async () => (await fetch(base + "/readyz").catch(() => null))?.ok);
  const token = (uid, role) => execFileSync(bin, ["token", "--data", data, "--uid", uid, ...(role ? ["--role", role] : [])]).toString().trim();
  const alice = token("alice"), admin = token("root", "admin");

  // A linked session on the sim, an API key, a webhook subscription of format meta.
  await api("GET", "/api/client/apikeys", alice);
  const sessionId = (await api("GET", "/api/client/qr", alice)).sessionId;
  const phone = "447700900081", customer = "15550100401";
  await api("POST", "/api/dev/sim/scan", null, { sessionId, phone });
  await poll("the session CONNECTED", async () => (await api("GET", "/api/client/status", alice)).status === "CONNECTED");
  const key = (await api("POST", "/api/admin/apikeys", admin, { userId: "alice", name: "cloud api client" })).rawKey;
  const deliveries = [];
  receiver = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      deliveries.push({ method: req.method, headers: req.headers, body });
      res.end();
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  const sub = await api("POST", "/api/client/webhooks", alice, {
    url: `http://127.0.0.1:${receiver.address().port}/whatsapp`, events: ["message.status", "message.received"], format: "meta",
  });

  // The library, pointed at the gateway: base URL <gateway>/cloud, the API key as the token.
  const sdk = new Client({ prefixUrl: base + "/cloud", graphVersion: "v27.0", request: { headers: { Authorization: `Bearer ${key}` }, retry: 0 } });

  const number = await sdk.phoneNumbers.getPhoneNumber({ phoneNumberID: sessionId }).json();
  assert.equal(number.id, sessionId);
  assert.equal(number.display_phone_number, phone);

  const sent = async (msg) => {
    const a = await sdk.message.createMessage({ phoneNumberID: sessionId, to: customer, ...msg }).json();
    assert.equal(a.messaging_product, "whatsapp");
    assert.equal(a.contacts[0].wa_id, customer);
    assert.ok(a.messages[0].id, "a message id");
    return a.messages[0].id;
  };
  const textID = await sent({ type: "text", text: { body: "order 1001 shipped" } });

  const png = tinyPNG();
  const up = await sdk.media.upload({ phoneNumberID: sessionId, file: new Blob([png], { type: "image/png" }), filename: "box.png", mimeType: "image/png" }).json();
  assert.match(up.id, /^media_/);
  const rec = await sdk.media.getURL({ mediaID: up.id }).json();
  assert.equal(rec.mime_type, "image/png");
  assert.equal(rec.file_size, png.length);
  const file = Buffer.from(await (await sdk.media.download({ mediaURL: rec.url, request: { headers: { Authorization: `Bearer ${key}` }, retry: 0 } })).arrayBuffer());
  assert.ok(file.equals(png), "the download is the upload");
  const imageID = await sent({ type: "image", image: { id: up.id, caption: "your box" } });
  const replyID = await sent({ type: "text", context: { message_id: textID }, text: { body: "it left the warehouse" } });
  const reactionID = await sent({ type: "reaction", reaction: { message_id: textID, emoji: "👍" } });

  // A kind a linked session cannot carry: Meta's error, which the library throws.
  let refused;
  try {
    await sent({ type: "interactive", interactive: { type: "button", body: { text: "Confirm?" }, action: { buttons: [{ type: "reply", reply: { id: "y", title: "Yes" } }] } } });
  } catch (err) {
    refused = err;
  }
  assert.ok(refused?.response, "buttons on a linked session were not refused");
  assert.equal(refused.response.status, 400);
  const e = (await refused.response.json()).error;
  assert.equal(e.code, 131051, JSON.stringify(e));
  assert.ok(e.message && e.type && e.fbtrace_id && "error_subcode" in e, JSON.stringify(e));

  // What the phone received.
  await poll("the four messages on the phone", async () => {
    const got = (await api("GET", `/api/dev/sim/messages?to=${customer}`)).messages;
    const by = Object.fromEntries(got.map((m) => [m.id, m]));
    return by[textID]?.text === "order 1001 shipped" && by[imageID]?.type === "image" && by[imageID]?.caption === "your box" &&
      by[replyID]?.replyTo === textID && by[reactionID]?.type === "reaction" && by[reactionID]?.emoji === "👍";
  });

  // The customer writes; the library's webhook parser reads and verifies every delivery.
  const inID = (await api("POST", "/api/dev/sim/inbound", null, { sessionId, from: customer, text: "thanks!" })).id;
  let status, message;
  await poll("Meta's payloads for the text's status and the incoming message", async () => {
    for (const d of deliveries.splice(0)) {
      const ev = await sdk.webhook.eventNotification({ method: d.method, query: {}, body: d.body, headers: d.headers });
      await ev.verifySignature(sub.secret); // throws when X-Hub-Signature-256 does not match
      await assert.rejects(ev.verifySignature(sub.secret + "x"), /Signature/);
      const n = ev.eventNotification;
      assert.equal(n.object, "whatsapp_business_account");
      const v = n.entry[0].changes[0].value;
      assert.equal(n.entry[0].changes[0].field, "messages");
      assert.equal(v.metadata.phone_number_id, sessionId);
      assert.equal(v.metadata.display_phone_number, phone);
      status ??= v.statuses?.find((s) => s.id === textID && ["sent", "delivered"].includes(s.status));
      message ??= v.messages?.find((m) => m.id === inID && m.type === "text" && m.text.body === "thanks!" && m.from === customer);
    }
    return status && message;
  });
}

async function api(method, p, tok, body) {
  const headers = { "Content-Type": "application/json" };
  if (tok) headers.Authorization = `Bearer ${tok}`;
  const res = await fetch(base + p, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const json = await res.json();
  assert.ok(res.ok, `${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function poll(what, cond, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A 1x1 PNG.
function tinyPNG() {
  return Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");
}

// Starts a real `opsgate serve` (the binary in $OPSGATE_BIN, built once by
// .ci/run) on a free loopback port with a SQLite store in a temp dir.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

/** Starts opsgate with config body (YAML after server: and store:). */
export async function startOpsgate(body) {
  const bin = process.env.OPSGATE_BIN;
  if (!bin) throw new Error("OPSGATE_BIN is not set: build the server (go build -o /tmp/opsgate ./cmd/opsgate) and point it there");
  const dir = mkdtempSync(path.join(os.tmpdir(), "opsgate-js-"));
  const port = await freePort();
  const cfg = path.join(dir, "opsgate.yaml");
  writeFileSync(cfg, `server:\n  listen: 127.0.0.1:${port}\n  data_dir: ${dir}/data\nstore:\n  driver: sqlite\n  dsn: ${dir}/data/opsgate.db\n` + body);
  const proc = spawn(bin, ["serve", "--config", cfg], { cwd: dir, env: { ...process.env, OPSGATE_TOKEN: "", OPSGATE_CONFIG: "" }, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const exited = new Promise((r) => proc.on("exit", r));
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      const res = await fetch(baseUrl + "/healthz");
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (i > 600 || proc.exitCode !== null) throw new Error("opsgate did not start:\n" + log);
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    baseUrl,
    dir,
    log: () => log,
    stop: async () => {
      proc.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

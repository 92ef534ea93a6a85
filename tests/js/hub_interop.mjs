#!/usr/bin/env node
// The official JS client (@huggingface/hub, pinned in package.json) against a
// Hub endpoint and a Hub cache directory, so tests can cross our C++ client
// with it in both directions. Prints one JSON document on stdout; the
// library's own chatter (console.debug "Downloading ...") goes to stderr.
//
//   node hub_interop.mjs download --endpoint URL --cache-dir DIR --repo ns/name
//        --revision REV [--files a,b,c] [--token hf_...] [--mode snapshot|direct]
//     -> {"paths":[...], "commit":"<40 hex>"}
//   node hub_interop.mjs find-offline --cache-dir DIR --repo ns/name
//        --revision COMMIT|REF --files a,b
//     -> {"paths":[...], "sha256":[...], "commit":"...", "missing":[...], "scan":{...}}
//        exit 1 when a file is not in the cache.
//
// What @huggingface/hub 2.17.5 writes into <cache>/models--<ns>--<name>/:
//   blobs/<etag>   the file: etag = sha256 for LFS files (paths-info lfs.oid),
//                  else the git blob sha1 (paths-info oid). Written as
//                  blobs/<etag>.incomplete, then renamed. No checksum check.
//   snapshots/<commit>/<path>  a RELATIVE symlink to ../../blobs/<etag>
//                  (one more ../ per directory level of <path>).
//   refs/<revision> only snapshotDownload() writes it (the commit, no newline);
//                  downloadFileToCacheDir() never does.
//   Nothing else: no .locks/, no .no_exist/, no resume of .incomplete files.
// How downloadFileToCacheDir() finds things:
//   - revision is a 40-hex commit and snapshots/<commit>/<path> exists
//     (stat, following the link) -> that path, with NO network request. That
//     is its only offline path; a branch name always goes to the network
//     (the library never reads refs/).
//   - otherwise POST /api/models/<repo>/paths-info/<rev> {paths,expand:true};
//     the snapshot directory is the revision if it is a commit hash, else
//     the file's lastCommit.id (the last commit that CHANGED that file, not
//     the commit the branch points at), else the etag. If the blob already
//     exists it only links it; otherwise GET resolve with Range: bytes=0-0
//     (following the 302 to storage) and then a full GET of the resolve URL.
//   node hub_interop.mjs upload --endpoint URL --repo ns/name --dir DIR --token hf_...
//        [--branch B] [--create 1] [--parent-commit OID] [--title T]
//     -> {"commit":"<40 hex>","url":"...","created":bool}
//     createRepo() (with --create) then uploadFiles() of every file under DIR
//     with the library's defaults (it offers xet, basic and multipart and
//     falls back when the server answers basic/multipart).
// So "download" by default does what snapshotDownload() does, restricted to
// --files: resolve the revision with modelInfo (GET /api/models/<repo>/
// revision/<rev>?expand=...&expand=sha), write refs/<rev>, then
// downloadFileToCacheDir() each file at the commit, which gives one coherent
// snapshots/<commit>/. --mode direct calls downloadFileToCacheDir() with the
// revision as given (no refs, per-file lastCommit snapshot dirs). Without
// --files, --mode snapshot runs snapshotDownload() itself (the whole repo).
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, readdir, lstat } from "node:fs/promises";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { createRepo, downloadFileToCacheDir, modelInfo, snapshotDownload, scanCacheDir, uploadFiles } from "@huggingface/hub";

// Keep stdout for the one JSON document.
for (const k of ["log", "info", "debug", "warn"]) console[k] = (...a) => console.error(...a);

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${a}`);
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${a} needs a value`);
    out[a.slice(2)] = v;
    i++;
  }
  return out;
}

function need(args, ...names) {
  for (const n of names) if (args[n] === undefined) throw new Error(`--${n} is required`);
}

const filesOf = (args) => (args.files ? args.files.split(",").filter(Boolean) : []);
const repoFolder = (cacheDir, repo) => join(cacheDir, `models--${repo.split("/").join("--")}`);

async function sha256File(p) {
  const h = createHash("sha256");
  for await (const c of createReadStream(p)) h.update(c);
  return h.digest("hex");
}

async function listSnapshot(dir, base = dir) {
  const out = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await listSnapshot(p, base)));
    else out.push(p);
  }
  return out.sort();
}

async function download(args) {
  need(args, "endpoint", "cache-dir", "repo", "revision");
  const common = { repo: args.repo, hubUrl: args.endpoint, cacheDir: args["cache-dir"] };
  if (args.token) common.accessToken = args.token;
  const files = filesOf(args);
  const mode = args.mode ?? "snapshot";

  if (mode === "direct") {
    if (!files.length) throw new Error("--mode direct needs --files");
    const paths = [];
    for (const f of files) paths.push(await downloadFileToCacheDir({ ...common, path: f, revision: args.revision }));
    return { paths, commit: null };
  }
  if (mode !== "snapshot") throw new Error(`unknown --mode ${mode}`);

  if (!files.length) {
    const folder = await snapshotDownload({ ...common, revision: args.revision });
    const commit = folder.split("/").pop();
    return { paths: await listSnapshot(folder), commit };
  }

  // snapshotDownload()'s own steps, for just these files.
  const info = await modelInfo({
    name: args.repo,
    hubUrl: args.endpoint,
    revision: args.revision,
    additionalFields: ["sha"],
    ...(args.token ? { accessToken: args.token } : {}),
  });
  const commit = info.sha;
  if (args.revision !== commit) {
    const { mkdir, writeFile } = await import("node:fs/promises");
    const refPath = join(repoFolder(args["cache-dir"], args.repo), "refs", args.revision);
    await mkdir(join(refPath, ".."), { recursive: true });
    await writeFile(refPath, commit);
  }
  const paths = [];
  for (const f of files) paths.push(await downloadFileToCacheDir({ ...common, path: f, revision: commit }));
  return { paths, commit };
}

async function findOffline(args) {
  need(args, "cache-dir", "repo", "revision");
  const cacheDir = args["cache-dir"];
  const repoDir = repoFolder(cacheDir, args.repo);
  let commit = args.revision;
  if (!/^[0-9a-f]{40}$/.test(commit)) {
    // The library has no offline ref lookup; do what huggingface_hub's
    // try_to_load_from_cache does: read refs/<revision>.
    try {
      commit = (await readFile(join(repoDir, "refs", args.revision), "utf8")).trim();
    } catch {
      commit = null;
    }
  }
  const noNetwork = async (url) => {
    throw new Error(`network access attempted while offline: ${url}`);
  };
  const paths = [];
  const sha256 = [];
  const missing = [];
  for (const f of filesOf(args)) {
    if (!commit) {
      missing.push(f);
      continue;
    }
    try {
      const p = await downloadFileToCacheDir({
        repo: args.repo,
        path: f,
        revision: commit,
        cacheDir,
        hubUrl: "http://127.0.0.1:9", // never contacted: fetch throws
        fetch: noNetwork,
      });
      paths.push(p);
      sha256.push(await sha256File(p));
    } catch (e) {
      console.error(`find-offline: ${f}: ${e.message}`);
      missing.push(f);
    }
  }

  // scanCacheDir's view of this repo and revision.
  let scan;
  try {
    const info = await scanCacheDir(cacheDir);
    const repo = info.repos.find((r) => r.id.type === "model" && r.id.name === args.repo);
    const rev = repo?.revisions.find((r) => r.commitOid === commit);
    scan = {
      found: !!repo,
      warnings: info.warnings.map((w) => String(w.message ?? w)),
      repo: repo && { path: repo.path, size: repo.size, filesCount: repo.filesCount, revisions: repo.revisions.map((r) => r.commitOid) },
      revision: rev && {
        commitOid: rev.commitOid,
        refs: rev.refs,
        size: rev.size,
        files: rev.files.map((x) => ({
          path: relative(rev.path, x.path),
          blob: relative(repo.path, x.blob.path),
          size: x.blob.size,
        })),
      },
    };
  } catch (e) {
    scan = { error: String(e.message ?? e) };
  }
  // Whether each returned path is a symlink (the library may copy instead).
  const symlink = [];
  for (const p of paths) symlink.push((await lstat(p)).isSymbolicLink());
  return { result: { paths, sha256, symlink, commit, missing, scan }, ok: missing.length === 0 };
}

async function upload(args) {
  need(args, "endpoint", "repo", "dir", "token");
  let created = false;
  if (args.create) {
    try {
      await createRepo({ repo: args.repo, hubUrl: args.endpoint, accessToken: args.token });
      created = true;
    } catch (e) {
      if (e.statusCode !== 409) throw e;
    }
  }
  const files = (await listSnapshot(args.dir)).map((abs) => ({ path: relative(args.dir, abs), content: pathToFileURL(abs) }));
  const out = await uploadFiles({
    repo: args.repo,
    hubUrl: args.endpoint,
    accessToken: args.token,
    files,
    branch: args.branch,
    parentCommit: args["parent-commit"],
    commitTitle: args.title ?? `Upload ${files.length} files`,
  });
  return { commit: out.commit.oid, url: out.commit.url, created };
}

async function main() {
  const [cmd, ...rest] = process.argv.slice(2);
  const args = parseArgs(rest);
  if (cmd === "download") {
    process.stdout.write(JSON.stringify(await download(args)) + "\n");
  } else if (cmd === "find-offline") {
    const { result, ok } = await findOffline(args);
    process.stdout.write(JSON.stringify(result) + "\n");
    if (!ok) process.exitCode = 1;
  } else if (cmd === "upload") {
    process.stdout.write(JSON.stringify(await upload(args)) + "\n");
  } else {
    throw new Error("usage: hub_interop.mjs download|find-offline|upload --option value ...");
  }
}

main().catch((e) => {
  console.error(`hub_interop: ${e.stack ?? e}`);
  process.exitCode = 2;
});

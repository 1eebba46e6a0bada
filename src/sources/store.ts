// Evidence sources: creation with secrets shown once, listing, rotation with a grace period,
// disabling, and the lookups the ingest routes and the observer make per request.

import { within } from "../deadline.js";
import { HttpError } from "../errors.js";
import type { Clock } from "../clock.js";
import type { EvidenceLog } from "../evidence/index.js";
import { newToken, randomIds, sha256Hex, type IdSource } from "../ids.js";
import type { SqlDriver, SqlTx } from "../ledger/driver.js";
import type { ShadowSettings } from "../observer/shadow.js";
import { SealError, type SecretSealer } from "./sealed.js";

export const source_kinds = ["decisions", "observer"] as const;
export type SourceKind = (typeof source_kinds)[number];
export const source_name_chars_max = 128;
export const upstream_url_chars_max = 2048;
export const rotation_grace_seconds_default = 86_400;
export const rotation_grace_seconds_max = 30 * 86_400;
/** Observer token lookups are cached this long: disabling or rotating elsewhere takes effect within it. */
export const observer_cache_ttl_ms = 5_000;
/** Observer tokens are `bsr_obs_…` (newToken's prefix, then "_"). */
const observer_token_kind = "bsr_obs";
export const observer_token_prefix = `${observer_token_kind}_`;
export const observer_cache_entries_max = 1_000;
/**
 * How long a proxied request waits for its token's look-up. Past it, a token seen before goes
 * through on its last answer and an unseen one is refused for now (503), while the look-up goes
 * on and its answer serves the next request. The store can be held for seconds (on SQLite,
 * another process's write lock, which the evidence writer queued ahead of the look-up waits
 * out), and observed traffic must not wait with it.
 */
export const observer_lookup_wait_ms = 250;

/** A token seen before goes on its last answer while the store is busy; an unseen one cannot be checked now. */
function busyAnswer(cached: { source: ObserverSource } | undefined): ObserverSource {
  if (cached) return cached.source;
  throw new Error(`the observer token lookup did not finish within ${observer_lookup_wait_ms} ms (the database is busy)`);
}

/** A token look-up's answer: the source it opens (null: none), or why the store gave none. */
type ObserverLookup = { source: ObserverSource | null } | { error: unknown };

type Purpose = "signing_key" | "api_key" | "observer_token";
const purposes_of: Readonly<Record<SourceKind, readonly Purpose[]>> = {
  decisions: ["signing_key", "api_key"],
  observer: ["observer_token"],
};

export interface SourceRow {
  source_id: string;
  kind: SourceKind;
  name: string;
  upstream_url: string | null;
  shadow_json: string | null;
  created_at_ms: number | string;
  disabled_at_ms: number | string | null;
}

export interface SourceView {
  id: string;
  kind: SourceKind;
  name: string;
  origin?: string;
  shadow?: ShadowSettings | null;
  created_at: string;
  disabled_at: string | null;
  secrets: Array<{ purpose: Purpose; created_at: string; expires_at: string | null }>;
}

/** The secrets of a source, returned once at creation or rotation. */
export type SourceSecrets = { signing_key: string; api_key: string } | { observer_token: string };

/** What a rotation answers; `replayed` when it repeats an earlier one's answer (same Idempotency-Key). */
export interface Rotation {
  source: SourceView;
  secrets: SourceSecrets;
  previous_valid_until: string;
  replayed?: true;
}

/** What a rotation sent with an Idempotency-Key keeps, sealed: its answer and the ids of the secrets it issued. */
interface SealedRotation {
  secrets: SourceSecrets;
  previous_valid_until: string;
  secret_ids: string[];
}

/** How long a rotation's answer can be had again with its Idempotency-Key: a retry after a lost
 *  answer comes within minutes, and until it is erased the answer's secrets are recoverable
 *  with the master key (otherwise only the signing key is; API keys and tokens are hashes). */
export const rotation_replay_window_ms = 60 * 60_000;

/** Idempotency-Key: visible ASCII, as many characters as an agent's idempotency_key may have. */
export const rotation_key_pattern = /^[\x21-\x7e]{1,255}$/;

const rotationSuperseded = (): HttpError =>
  new HttpError(
    409,
    "rotation_superseded",
    "the rotation sent with this Idempotency-Key has since been followed by another: its secrets are no longer the source's current ones and are not shown again; rotate with a new key",
  );

/** The sealed answer of a rotation is bound to its source and key: moved to another row, it does not open. */
const rotationContext = (source_id: string, idempotency_key: string): string => `rotation:${source_id}:${idempotency_key}`;

export interface ObserverSource {
  source_id: string;
  upstream: URL;
  shadow: ShadowSettings | null;
}

export function upstreamOrigin(upstream_url: string): string {
  return new URL(upstream_url).origin;
}

const iso = (ms: number | string | null): string | null => (ms === null ? null : new Date(Number(ms)).toISOString());

export interface SourceStoreOptions {
  driver: SqlDriver;
  log: EvidenceLog;
  sealer: SecretSealer;
  clock: Clock;
  ids?: IdSource;
}

export class SourceStore {
  private readonly driver: SqlDriver;
  private readonly log: EvidenceLog;
  private readonly sealer: SecretSealer;
  private readonly clock: Clock;
  private readonly ids: IdSource;
  /** Valid observer tokens by hash: when last read, and when the token's grace ends (null: never). */
  private readonly observerCache = new Map<string, { at_ms: number; expires_at_ms: number | null; source: ObserverSource }>();
  /** Token look-ups under way, by hash: requests that come meanwhile share one. */
  private readonly observerLookups = new Map<string, Promise<ObserverLookup>>();

  constructor(options: SourceStoreOptions) {
    this.driver = options.driver;
    this.log = options.log;
    this.sealer = options.sealer;
    this.clock = options.clock;
    this.ids = options.ids ?? randomIds;
  }

  private now_ms(): number {
    return this.clock().getTime();
  }

  async create(input: { kind: SourceKind; name: string; upstream_url?: string; shadow?: ShadowSettings }): Promise<{ source: SourceView; secrets: SourceSecrets }> {
    const source_id = this.ids("src");
    const now_ms = this.now_ms();
    const upstream_url = input.kind === "observer" ? (input.upstream_url ?? null) : null;
    const shadow_json = input.kind === "observer" && input.shadow ? JSON.stringify(input.shadow) : null;
    const secrets = await this.driver.transaction(async (tx) => {
      await tx.run(
        "INSERT INTO evidence_sources (source_id, kind, name, upstream_url, shadow_json, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
        [source_id, input.kind, input.name, upstream_url, shadow_json, now_ms],
      );
      const { secrets: issued } = await this.issueSecrets(tx, source_id, input.kind, now_ms);
      const origin = upstream_url ? { upstream_origin: upstreamOrigin(upstream_url) } : {};
      await this.record(tx, { action: "source.create", source_id, kind: input.kind, name: input.name, ...origin });
      return issued;
    });
    return { source: await this.view(source_id), secrets };
  }

  private async issueSecrets(tx: SqlTx, source_id: string, kind: SourceKind, now_ms: number): Promise<{ secrets: SourceSecrets; secret_ids: string[] }> {
    const issued: Record<string, string> = {};
    const secret_ids: string[] = [];
    for (const purpose of purposes_of[kind]) {
      const secret_id = this.ids("sec");
      const value = newToken(purpose === "signing_key" ? "bsr_whsec" : purpose === "api_key" ? "bsr_srckey" : observer_token_kind);
      const sealed = purpose === "signing_key" ? this.sealer.seal(value, secret_id) : null;
      const hash = purpose === "signing_key" ? null : sha256Hex(value);
      await tx.run(
        "INSERT INTO evidence_source_secrets (secret_id, source_id, purpose, token_sha256, ciphertext, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
        [secret_id, source_id, purpose, hash, sealed, now_ms],
      );
      issued[purpose] = value;
      secret_ids.push(secret_id);
    }
    return { secrets: issued as SourceSecrets, secret_ids };
  }

  private async record(tx: SqlTx, body: Record<string, unknown>): Promise<void> {
    await this.log.append(tx, { kind: "gate.operator", source: "gate", body });
  }

  /** The source's row; `lock` (in a write transaction) holds it until commit, so that of two
   *  changes to one source on two instances the second waits and sees the first's. NO KEY
   *  UPDATE: an ingest into the source holds the log's sequence lock while its rows' foreign
   *  keys check this row, and the change appends evidence next (FOR UPDATE deadlocked the two). */
  private async row(tx: SqlTx, source_id: string, lock = false): Promise<SourceRow> {
    const row = await this.rowIfAny(tx, source_id, lock);
    if (!row) throw new HttpError(404, "not_found", "no such evidence source");
    return row;
  }

  private rowIfAny(tx: SqlTx, source_id: string, lock = false): Promise<SourceRow | undefined> {
    return tx.get<SourceRow>(
      `SELECT source_id, kind, name, upstream_url, shadow_json, created_at_ms, disabled_at_ms FROM evidence_sources WHERE source_id = ? ${lock ? tx.forNoKeyUpdate : ""}`,
      [source_id],
    );
  }

  /** The source as the operator sees it: no secret, only the upstream's origin. */
  async view(source_id: string): Promise<SourceView> {
    return this.driver.read(async (tx) => {
      const row = await this.row(tx, source_id);
      const secrets = await tx.all<{ purpose: Purpose; created_at_ms: number; expires_at_ms: number | null }>(
        "SELECT purpose, created_at_ms, expires_at_ms FROM evidence_source_secrets WHERE source_id = ? AND (expires_at_ms IS NULL OR expires_at_ms > ?) ORDER BY created_at_ms, secret_id",
        [source_id, this.now_ms()],
      );
      return toView(row, secrets);
    });
  }

  async list(): Promise<SourceView[]> {
    const ids = await this.driver.read((tx) => tx.all<{ source_id: string }>("SELECT source_id FROM evidence_sources ORDER BY created_at_ms, source_id"));
    const views: SourceView[] = [];
    for (const { source_id } of ids) views.push(await this.view(source_id));
    return views;
  }

  /**
   * New secrets now; the current ones stay valid for `grace_seconds` (0 ends them at once). Keys
   * still in an earlier rotation's grace end now: a source never has more than two signing keys,
   * so a delivery with a wrong signature costs at most two HMACs however often it was rotated.
   *
   * With an `idempotency_key`, repeating the request within rotation_replay_window_ms answers as
   * the first time (`replayed`) and issues nothing new, while the secrets it issued are still the
   * source's current ones: a retry after a lost answer must not be a second rotation, which would
   * end the secrets the source's gateway still uses and issue ones nobody saw. The answer is kept
   * sealed under the master key until the window ends (the maintenance sweep erases it), the next
   * rotation or a disable; each replay is recorded (source.rotate_replayed), since it shows
   * secrets. The same key with another grace_seconds is 409 idempotency_key_reused; a repeat
   * after a later rotation 409 rotation_superseded, after the window 409 rotation_replay_expired,
   * and one sealed under another master key 409 rotation_unreadable.
   */
  async rotate(source_id: string, grace_seconds: number, idempotency_key?: string): Promise<Rotation> {
    const now_ms = this.now_ms();
    const until_ms = now_ms + grace_seconds * 1000;
    const request_sha256 = sha256Hex(JSON.stringify({ grace_seconds }));
    try {
      const answer = await this.driver.transaction(async (tx): Promise<Omit<Rotation, "source">> => {
        const row = await this.row(tx, source_id, true);
        if (row.disabled_at_ms !== null) throw new HttpError(409, "source_disabled", "a disabled source cannot be rotated");
        if (idempotency_key !== undefined) {
          const earlier = await this.earlierRotation(tx, source_id, idempotency_key, request_sha256, now_ms);
          if (earlier) {
            await this.record(tx, { action: "source.rotate_replayed", source_id });
            return { secrets: earlier.secrets, previous_valid_until: earlier.previous_valid_until, replayed: true };
          }
        }
        await tx.run(
          // Cast: PostgreSQL would take untyped CASE branches for text, which a bigint column refuses.
          "UPDATE evidence_source_secrets SET expires_at_ms = CASE WHEN expires_at_ms IS NULL THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END WHERE source_id = ? AND (expires_at_ms IS NULL OR expires_at_ms > ?)",
          [until_ms, now_ms, source_id, now_ms],
        );
        await this.forgetRotationAnswers(tx, source_id);
        const { secrets, secret_ids } = await this.issueSecrets(tx, source_id, row.kind, now_ms);
        const previous_valid_until = new Date(until_ms).toISOString();
        if (idempotency_key !== undefined) {
          const sealed: SealedRotation = { secrets, previous_valid_until, secret_ids };
          await tx.run(
            "INSERT INTO evidence_source_rotations (source_id, idempotency_key, request_sha256, sealed_answer, created_at_ms) VALUES (?, ?, ?, ?, ?)",
            [source_id, idempotency_key, request_sha256, this.sealer.seal(JSON.stringify(sealed), rotationContext(source_id, idempotency_key)), now_ms],
          );
        }
        await this.record(tx, { action: "source.rotate", source_id, grace_seconds });
        return { secrets, previous_valid_until };
      });
      return { source: await this.view(source_id), ...answer };
    } finally {
      // Also after a replay, or a commit whose outcome was unknown: the rotation may have landed.
      this.observerCache.clear();
    }
  }

  /** The answer of an earlier rotation sent with this key, or undefined when there was none. */
  private async earlierRotation(tx: SqlTx, source_id: string, idempotency_key: string, request_sha256: string, now_ms: number): Promise<SealedRotation | undefined> {
    const earlier = await tx.get<{ request_sha256: string; sealed_answer: string | null; created_at_ms: number | string }>(
      "SELECT request_sha256, sealed_answer, created_at_ms FROM evidence_source_rotations WHERE source_id = ? AND idempotency_key = ?",
      [source_id, idempotency_key],
    );
    if (earlier === undefined) return undefined;
    if (earlier.request_sha256 !== request_sha256) {
      throw new HttpError(409, "idempotency_key_reused", "this Idempotency-Key was sent with another rotation of this source (a different grace_seconds): send a new key for a new rotation");
    }
    if (earlier.sealed_answer === null) throw rotationSuperseded();
    if (now_ms - Number(earlier.created_at_ms) >= rotation_replay_window_ms) {
      throw new HttpError(
        409,
        "rotation_replay_expired",
        `the rotation sent with this Idempotency-Key was made more than ${rotation_replay_window_ms / 60_000} minutes ago: its secrets are not shown again; rotate with a new key`,
      );
    }
    let sealed: SealedRotation;
    try {
      sealed = JSON.parse(this.sealer.open(earlier.sealed_answer, rotationContext(source_id, idempotency_key))) as SealedRotation;
    } catch (error) {
      if (!(error instanceof SealError)) throw error;
      throw new HttpError(409, "rotation_unreadable", "the answer of the rotation sent with this Idempotency-Key was sealed under another master key and cannot be shown again; rotate with a new key");
    }
    // Whatever else ended them (an older release sharing the database, a hand-made fix), ended secrets are never shown.
    const placeholders = sealed.secret_ids.map(() => "?").join(", ");
    const current = await tx.get<{ current: number | string }>(
      `SELECT COUNT(*) AS current FROM evidence_source_secrets WHERE source_id = ? AND expires_at_ms IS NULL AND secret_id IN (${placeholders})`,
      [source_id, ...sealed.secret_ids],
    );
    if (Number(current?.current) !== sealed.secret_ids.length) throw rotationSuperseded();
    return sealed;
  }

  /** Secrets that are no longer current are never shown again: earlier rotations' answers go. */
  private async forgetRotationAnswers(tx: SqlTx, source_id: string): Promise<void> {
    await tx.run("UPDATE evidence_source_rotations SET sealed_answer = NULL WHERE source_id = ? AND sealed_answer IS NOT NULL", [source_id]);
  }

  /** Erases the sealed answers of rotations past the replay window (the maintenance timer's sweep). */
  async forgetExpiredRotationAnswers(): Promise<void> {
    const before_ms = this.now_ms() - rotation_replay_window_ms;
    await this.driver.transaction((tx) =>
      tx.run("UPDATE evidence_source_rotations SET sealed_answer = NULL WHERE sealed_answer IS NOT NULL AND created_at_ms <= ?", [before_ms]),
    );
  }

  async disable(source_id: string): Promise<SourceView> {
    await this.driver.transaction(async (tx) => {
      const row = await this.row(tx, source_id, true);
      if (row.disabled_at_ms !== null) return;
      await tx.run("UPDATE evidence_sources SET disabled_at_ms = ? WHERE source_id = ?", [this.now_ms(), source_id]);
      await this.forgetRotationAnswers(tx, source_id);
      await this.record(tx, { action: "source.disable", source_id });
    });
    this.observerCache.clear();
    return this.view(source_id);
  }

  async setShadow(source_id: string, shadow: ShadowSettings | null): Promise<SourceView> {
    await this.driver.transaction(async (tx) => {
      const row = await this.row(tx, source_id, true);
      if (row.kind !== "observer") throw new HttpError(409, "not_an_observer", "shadow settings apply to observer sources only");
      if (row.disabled_at_ms !== null) throw new HttpError(409, "source_disabled", "a disabled source's shadow settings cannot be changed");
      await tx.run("UPDATE evidence_sources SET shadow_json = ? WHERE source_id = ?", [shadow ? JSON.stringify(shadow) : null, source_id]);
      await this.record(tx, { action: "source.shadow", source_id, shadow });
    });
    this.observerCache.clear();
    return this.view(source_id);
  }

  /**
   * An enabled decisions source, or a typed 404/403 (read outside any transaction: see
   * lockEnabledSource). The read itself never throws: an unknown id then waits for the read's
   * durability like a known one, and takes as long, so the ingest routes do not tell them apart.
   */
  async decisionsSource(source_id: string): Promise<SourceRow> {
    const row = await this.driver.read((tx) => this.rowIfAny(tx, source_id));
    if (row?.kind !== "decisions") throw new HttpError(404, "not_found", "no such decisions source");
    if (row.disabled_at_ms !== null) throw new HttpError(403, "source_disabled", "this evidence source is disabled");
    return row;
  }

  /**
   * Whether the master key opens the sealed signing keys deliveries can still use (true when
   * there is none): checked at start, so a lost or changed master key stops the start instead of
   * failing every delivery later. One is tried, the newest of an enabled source still valid: all
   * are sealed under the one key, and a disabled source's or an ended key is never opened again.
   */
  async sealerOpensStoredKeys(): Promise<boolean> {
    const row = await this.driver.read((tx) =>
      tx.get<{ secret_id: string; ciphertext: string }>(
        `SELECT k.secret_id, k.ciphertext FROM evidence_source_secrets k JOIN evidence_sources s ON s.source_id = k.source_id
         WHERE k.purpose = 'signing_key' AND s.disabled_at_ms IS NULL AND (k.expires_at_ms IS NULL OR k.expires_at_ms > ?)
         ORDER BY k.created_at_ms DESC, k.secret_id DESC LIMIT 1`,
        [this.now_ms()],
      ),
    );
    if (row === undefined) return true;
    try {
      this.sealer.open(row.ciphertext, row.secret_id);
      return true;
    } catch (error) {
      if (error instanceof SealError) return false;
      throw error;
    }
  }

  /** The signing keys valid now (the current one and any still in their grace period), each with
   *  its secret's id (what ingestDelivery checks again). */
  async signingKeys(source_id: string): Promise<Array<{ secret_id: string; key: string }>> {
    const rows = await this.driver.read((tx) =>
      tx.all<{ secret_id: string; ciphertext: string }>(
        "SELECT secret_id, ciphertext FROM evidence_source_secrets WHERE source_id = ? AND purpose = 'signing_key' AND (expires_at_ms IS NULL OR expires_at_ms > ?)",
        [source_id, this.now_ms()],
      ),
    );
    return rows.map((row) => ({ secret_id: row.secret_id, key: this.sealer.open(row.ciphertext, row.secret_id) }));
  }

  /** The id of the secret when `token` is a valid API key of this source (looked up by hash), else undefined. */
  async apiKeySecret(source_id: string, token: string): Promise<string | undefined> {
    const row = await this.driver.read((tx) =>
      tx.get<{ secret_id: string }>(
        "SELECT secret_id FROM evidence_source_secrets WHERE token_sha256 = ? AND source_id = ? AND purpose = 'api_key' AND (expires_at_ms IS NULL OR expires_at_ms > ?)",
        [sha256Hex(token), source_id, this.now_ms()],
      ),
    );
    return row?.secret_id;
  }

  /** Token lookups under way, some perhaps past their wait: at most observer_cache_entries_max. */
  get observerLookupsPending(): number {
    return this.observerLookups.size;
  }

  /**
   * The enabled observer a token opens, or null. Cached briefly: this runs on every proxied
   * request. When the database fails, or does not answer within observer_lookup_wait_ms, a token
   * seen before keeps its last answer (looked up again after another cache period), so observed
   * traffic still flows; an unseen token's lookup throws.
   */
  async observerByToken(token: string): Promise<ObserverSource | null> {
    const hash = sha256Hex(token);
    let cached = this.observerCache.get(hash);
    // A token rotated out ends when its grace does, cached or not, and whatever the store's state.
    if (cached && cached.expires_at_ms !== null && this.now_ms() >= cached.expires_at_ms) {
      this.observerCache.delete(hash);
      cached = undefined;
    }
    if (cached && this.now_ms() - cached.at_ms < observer_cache_ttl_ms) return cached.source;
    let lookup = this.observerLookups.get(hash);
    // One is under way already (the store is slow): a token seen before goes on its last answer at once.
    if (lookup && cached) return cached.source;
    if (!lookup) {
      // Lookups left running past their wait hold the store's queue: as many as the cache holds tokens.
      if (this.observerLookups.size >= observer_cache_entries_max) return busyAnswer(cached);
      lookup = this.lookUpObserver(hash).finally(() => this.observerLookups.delete(hash));
      this.observerLookups.set(hash, lookup);
    }
    const answer = await within(lookup, observer_lookup_wait_ms);
    if (answer === undefined) return busyAnswer(cached);
    if ("source" in answer) return answer.source;
    if (cached) return cached.source;
    throw answer.error;
  }

  /** Reads the source a token opens and remembers the answer; never rejects. */
  private async lookUpObserver(hash: string): Promise<ObserverLookup> {
    try {
      return { source: await this.readObserver(hash) };
    } catch (error) {
      // The last answer stands for another cache period before the store is asked again.
      const cached = this.observerCache.get(hash);
      if (cached) this.observerCache.set(hash, { ...cached, at_ms: this.now_ms() });
      return { error };
    }
  }

  /** The source a token opens now, or null, remembered when it opens one. */
  private async readObserver(hash: string): Promise<ObserverSource | null> {
    // Unreported: the answer only lets a request through, so it need not wait for the WAL
    // flush of whatever it saw (a slow disk would otherwise hold observed traffic).
    const row = await this.driver.read(
      (tx) =>
        tx.get<SourceRow & { expires_at_ms: number | null }>(
          `SELECT s.source_id, s.upstream_url, s.shadow_json, s.disabled_at_ms, k.expires_at_ms FROM evidence_source_secrets k
           JOIN evidence_sources s ON s.source_id = k.source_id
           WHERE k.token_sha256 = ? AND k.purpose = 'observer_token' AND (k.expires_at_ms IS NULL OR k.expires_at_ms > ?)`,
          [hash, this.now_ms()],
        ),
      { unreported: true },
    );
    // Only valid tokens are remembered, so anyone sending random tokens cannot push them out;
    // a token found invalid (a source disabled meanwhile) is forgotten, never served again.
    this.observerCache.delete(hash);
    if (!row || row.disabled_at_ms !== null || !row.upstream_url) return null;
    const source = { source_id: row.source_id, upstream: new URL(row.upstream_url), shadow: row.shadow_json ? (JSON.parse(row.shadow_json) as ShadowSettings) : null };
    if (this.observerCache.size >= observer_cache_entries_max) this.observerCache.delete(this.observerCache.keys().next().value as string);
    // Read from when the answer came: a lookup that waited long must not leave an entry already stale.
    this.observerCache.set(hash, { at_ms: this.now_ms(), expires_at_ms: row.expires_at_ms === null ? null : Number(row.expires_at_ms), source });
    return source;
  }
}

function toView(row: SourceRow, secrets: Array<{ purpose: Purpose; created_at_ms: number; expires_at_ms: number | null }>): SourceView {
  const view: SourceView = {
    id: row.source_id,
    kind: row.kind,
    name: row.name,
    created_at: iso(row.created_at_ms)!,
    disabled_at: iso(row.disabled_at_ms),
    secrets: secrets.map((secret) => ({ purpose: secret.purpose, created_at: iso(secret.created_at_ms)!, expires_at: iso(secret.expires_at_ms) })),
  };
  if (row.upstream_url) {
    view.origin = upstreamOrigin(row.upstream_url);
    view.shadow = row.shadow_json ? (JSON.parse(row.shadow_json) as ShadowSettings) : null;
  }
  return view;
}

/**
 * Inside an ingest's write transaction, before the log's sequence lock: the source is still
 * enabled, or a 403. The route's check ran before the delivery was parsed and validated; a
 * disable that committed since (on any instance) stops the delivery here, and one in flight is
 * waited for (FOR SHARE against its FOR NO KEY UPDATE), so nothing lands after a disable's answer.
 */
export async function lockEnabledSource(tx: SqlTx, source_id: string): Promise<void> {
  const row = await tx.get<{ disabled_at_ms: number | string | null }>(`SELECT disabled_at_ms FROM evidence_sources WHERE source_id = ? ${tx.forShare}`, [source_id]);
  if (!row) throw new HttpError(404, "not_found", "no such evidence source");
  if (row.disabled_at_ms !== null) throw new HttpError(403, "source_disabled", "this evidence source is disabled");
}

/**
 * Inside an ingest's write transaction, after lockEnabledSource: one of the secrets the delivery
 * was authenticated with (its matching signing keys, or its API key) is still valid at `now_ms`,
 * or a 401. The route checked them before the body was parsed and validated; a rotation that
 * ended them since (grace_seconds 0, or a grace that ran out meanwhile) committed before this
 * transaction took the source's row (a rotation holds it until it commits), so nothing is stored
 * under a key after the answer that ended it.
 */
export async function checkCredentialStillValid(tx: SqlTx, secret_ids: readonly string[], now_ms: number): Promise<void> {
  if (secret_ids.length === 0) return;
  const row = await tx.get(
    `SELECT 1 AS one FROM evidence_source_secrets WHERE secret_id IN (${secret_ids.map(() => "?").join(", ")}) AND (expires_at_ms IS NULL OR expires_at_ms > ?)`,
    [...secret_ids, now_ms],
  );
  if (row === undefined) {
    throw new HttpError(
      401,
      "credential_expired",
      "the key this delivery was authenticated with was rotated out (or its grace period ended) while the delivery was on its way; nothing was stored: send it again with the source's current key",
    );
  }
}

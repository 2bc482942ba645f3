// Types of verity.js: Verity's claim checks and typed steps for any web page.

/** The core's provider JSON (an OpenAI-compatible endpoint or Anthropic). */
export type ProviderConfig =
  | { api: 'openai'; baseUrl: string; model: string; apiKey?: string; stream?: boolean; [option: string]: unknown }
  | { api: 'anthropic'; model: string; apiKey?: string; baseUrl?: string; headers?: [string, string][]; [option: string]: unknown };

/** Omitted or `"offline"`: the offline baseline (a lexical heuristic, not a language model). */
export type ProviderOption = ProviderConfig | 'offline' | undefined;

export interface Item { id: string; text: string }

export interface Usage { input: number; output: number; cacheRead: number; cacheWrite: number; cost: number }

export interface Spent { turns: number; requests: number; failedAttempts: number; retries: number; usage: Usage }

export interface CorpusSummary { id: string | null; items: number; bytes: number; indexed: boolean; indexMs: number | null; /** The main corpus only: whether the browser's storage holds this version. */ stored?: "saved" | "saving" | "notSaved" }

export type Verdict = 'supported' | 'contradicted' | 'insufficient';

/** The core's claim report, plus the corpus items its citations quote. */
export interface Report {
  claim: string;
  assessment: { verdict: Verdict; confidence: number; citations: string[]; rationale?: string };
  route: 'single call' | 'agent escalation';
  summary: string;
  requests: number;
  usage: Usage;
  cited: Item[];
  [field: string]: unknown;
}

/** Where a piece of text sits: UTF-8 bytes and UTF-16 code units (JavaScript's indices). */
export interface Span { start: number; end: number; startUtf16: number; endUtf16: number }

/** A citation located in its passage: the quote that holds the claim and where it sits. */
export interface Citation { passage?: string; quote: string; span: Span; text: string }

export type SentenceStatus = Verdict | 'failed' | 'not-checkable' | 'pending';

/** One sentence of a checked answer. */
export interface SentenceReport {
  index: number;
  text: string;
  span: Span;
  claim?: string;
  status: SentenceStatus;
  confidence?: number;
  citations?: Citation[];
  marks?: { label: string; span: Span; passage?: string; holds: 'supports' | 'contradicts' | 'does-not-support' | 'unknown-passage' | 'unchecked' }[];
  report?: Omit<Report, 'cited'>;
  failure?: { kind: string; message: string };
  /** With `decompose`: its atomic claims, each checked (the sentence is the worst of them). */
  claims?: { text: string; span: Span; status: SentenceStatus; confidence?: number; citations?: Citation[]; report?: Omit<Report, 'cited'>; failure?: { kind: string; message: string } }[];
  /** With `decompose`: claims dropped as not the answer's words, and why it was checked whole. */
  decomposed?: { ungrounded: number; whole?: { kind: string; message: string } };
}

/** The core's answer report, plus the corpus items its sentences' citations quote. */
export interface AnswerReport {
  answer: string;
  sentences: SentenceReport[];
  counts: { supported: number; contradicted: number; insufficient: number; failed: number; notCheckable: number };
  supportedShare: number;
  /** Every checked sentence supported; absent when nothing was checkable. */
  faithful?: boolean;
  requests: number;
  usage: Usage;
  cited: Item[];
}

/** The core's events (stages, model calls, tool calls, retries, streamed pieces). */
export type VerityEvent =
  | { type: 'stage'; stage: 'retrieve' | 'assess' | 'research' | 'reassess' | 'summary'; turn?: number; of?: number; evidence?: number }
  | { type: 'modelCall'; call: number; retry: number; delayMs: number }
  | { type: 'modelAnswered'; call: number; stopReason: string; usage: Usage; error?: string }
  | { type: 'toolCall'; tool: string; host: boolean }
  | { type: 'toolSettled'; tool: string; isError: boolean }
  | { type: 'retry'; attempt: number; delayMs: number; message: string }
  | { type: 'delta'; call: number; delta: unknown }
  | { type: 'sentenceStarted'; index: number }
  | { type: 'sentenceChecked'; sentence: SentenceReport }
  | { type: string; [field: string]: unknown };

/** A typed failure: `provider`, `invalid-submissions`, `turn-limit`, `no-submit`, the claim
 * check's kinds, `config`, `cancelled`, `corpus` (a refused corpus) or `worker`. */
export class VerityError extends Error {
  readonly kind: string;
  readonly spent: Spent | null;
  readonly failure: unknown;
}

export class VerityCorpus {
  readonly name: string;
  add(items: Item[]): Promise<CorpusSummary>;
  addFile(name: string, text: string): Promise<CorpusSummary>;
  drop(): void;
}

export interface PageTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments; `run` is called only with arguments valid against it. */
  parameters?: object;
  run(args: any, context: { signal?: AbortSignal }): unknown | Promise<unknown>;
  replaySafe?: boolean;
  sequential?: boolean;
}

export class Verity extends EventTarget {
  /** `concurrency` (default 2): how many checks, or an answer's sentences, run at once. */
  constructor(options?: { provider?: ProviderOption; concurrency?: number; workerUrl?: string | URL });
  createCorpus(): VerityCorpus;
  checkClaim(options: { claim: string; corpus: VerityCorpus; signal?: AbortSignal; onEvent?: (event: VerityEvent) => void; provider?: ProviderOption }): Promise<Report>;
  /** Checks a whole answer sentence by sentence; `marks` maps its citation marks to passage ids;
   * `decompose` splits each sentence into atomic claims first (one more request a sentence). */
  checkAnswer(options: { answer: string; corpus: VerityCorpus; marks?: Record<string, string>; decompose?: boolean; signal?: AbortSignal; onEvent?: (event: VerityEvent) => void; onSentence?: (sentence: SentenceReport) => void; provider?: ProviderOption }): Promise<AnswerReport>;
  runStep<T = unknown>(options: {
    prompt: string;
    schema: object;
    system?: string;
    tools?: PageTool[];
    signal?: AbortSignal;
    onEvent?: (event: VerityEvent) => void;
    provider?: ProviderOption;
    maxTurns?: number;
    maxAttempts?: number;
    retry?: { maxRetries?: number; baseDelayMs?: number; [option: string]: unknown };
  }): Promise<T>;
  terminate(): void;
}

/** `<verity-check claim="..." corpus="URL" provider="JSON">`, or `answer="..."` (or the
 * element's own text) with `marks="JSON"` and `decompose` for a whole answer; events `verity-result`
 * (`detail`: the report) and `verity-error` (`detail`: `{kind, message, spent}`). Parts:
 * `answer`, `sentence` (with the status: `sentence supported`), `tag`, `evidence`, `passage`,
 * `quote`, `mark`, `head`, `badge`, `meta`, `status`. */
export class VerityCheckElement extends HTMLElement {
  report: Report | AnswerReport | null;
  /** The provider set by script, used instead of the `provider` attribute; unlike the
   * attribute (page markup, which refuses an API key) it may carry `apiKey`. Setting it checks again. */
  provider: ProviderOption | null;
  refresh(): void;
}

declare global {
  interface HTMLElementTagNameMap { 'verity-check': VerityCheckElement }
}

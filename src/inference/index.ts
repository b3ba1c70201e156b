export { DEFAULT_TOOLS, DEFAULT_VENV, inferCommands } from './infer.ts';
export { directoryReader, gitTreeReader, type RepoReader } from './reader.ts';
export type { Ecosystem, InferOptions, InferredCommands } from './types.ts';

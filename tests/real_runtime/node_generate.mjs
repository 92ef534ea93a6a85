// Greedy generation in node-llama-cpp (its prebuilt CPU llama.cpp):
//   node node_generate.mjs N PROMPT MODEL.gguf...
// For each model, in order, prints "MODEL <path>", "PROMPT <ids>" and
// "GEN <ids>" on stdout (the last two as skippy-ref-stage does). One
// process for all models: the same runtime, and getLlama (seconds) runs
// once. One thread, flash attention at its default ("auto"), greedy
// (temperature 0); nothing is downloaded or built: without the prebuilt
// binary this fails instead.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [nArg, prompt, ...models] = process.argv.slice(2);
const n = Number(nArg);
if (!models.length || !Number.isInteger(n) || n <= 0) {
  console.error("usage: node node_generate.mjs N PROMPT MODEL.gguf...");
  process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", skipDownload: true,
                              logLevel: LlamaLogLevel.error});
for (const modelPath of models) {
  const model = await llama.loadModel({modelPath});
  const context = await model.createContext({threads: 1, contextSize: 256, sequences: 1});
  const sequence = context.getSequence();
  // tokenize() adds no BOS; llama.cpp's own tools prepend it when the
  // vocabulary asks for it (the fixtures' prompt ids start with it).
  const tokens = model.tokenize(prompt);
  if (model.tokens.shouldPrependBosToken && model.tokens.bos != null && tokens[0] !== model.tokens.bos)
    tokens.unshift(model.tokens.bos);
  const generated = [];
  for await (const token of sequence.evaluate(tokens, {temperature: 0})) {
    generated.push(token);
    if (generated.length >= n) break;
  }
  console.log(`MODEL ${modelPath}`);
  console.log(`PROMPT ${tokens.join(" ")}`);
  console.log(`GEN ${generated.join(" ")}`);
  await context.dispose();
  await model.dispose();
}
await llama.dispose();

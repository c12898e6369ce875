// The package's entry point, the OpenCode plugin (plugin/index.mjs), at
// the package's root: OpenCode 2 loads a plugin directory's index file
// and reads no "main" (measured on 2.1.2).
export { default } from "./plugin/index.mjs"

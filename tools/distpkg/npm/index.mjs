// The OpenCode 2 plugin definition, at the package's root: OpenCode 2
// loads a plugin directory's index file and reads no "main" (measured on
// 2.1.2); OpenCode 1.x loads "main", plugin/index.mjs.
import { setup } from "./plugin/index.mjs"

export default { id: "mcp-reconnect", setup }

--- The review options (|amp-config-review|) as setup() resolved them, or
--- the defaults before setup().
local M = {}

function M.get()
  local ok, core = pcall(require, "amp.core")
  local config = ok and core.get_config() or nil
  return (config and config.review) or require("amp.config").defaults.review
end

function M.keys()
  return M.get().keys
end

return M

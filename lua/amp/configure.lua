--- What `setup()` with options does besides starting the server
--- (lua/amp/core.lua): the review key, the log's settings for a server
--- that is not started now, a restart when the server's options changed,
--- and OpenCtx. `setup({})` as the first setup() needs none of it (the
--- schema's defaults: no review key, no OpenCtx provider), so this module
--- and the configuration's modules are not loaded at start-up then.
local M = {}
local H = {}

H.review_key = nil ---@type string? the key the last setup() mapped
H.openctx_opts = nil ---@type table? OpenCtx's options as last configured

--- Applies the resolved configuration `config` of a setup() whose library
--- is loaded.
---@param config amp.Config
function M.apply(config)
  local core = require("amp.core")
  local native = require("amp.native")
  H.map_review_key(config)
  local running = core.is_running()
  if running or not config.auto_start then
    -- (A server that starts now configures the log itself: `start` does
    -- the same work, once. The library makes the log's directory.)
    native.call("configure_log", config.log_file, config.log_level, config.log_max_bytes)
  end
  if running then
    if not vim.deep_equal(H.running_options(core), M.server_part(config)) then
      core.restart()
    end
  elseif config.auto_start then
    core.start(true)
  end
  -- After the server: OpenCtx logs to the log the server configured.
  H.configure_openctx(config)
end

--- The part of the configuration a running server depends on: what the
--- native server reads when it starts (the schema's native options), in
--- new tables. A change to any of them takes a restart.
---@param config amp.Config
---@return table
function M.server_part(config)
  return require("amp.config.defaults").native(config)
end

--- OpenCtx is configured again by the next setup() even if its options
--- did not change (after `:Amp build` loaded the library it needs).
function M.forget_openctx()
  H.openctx_opts = nil
end

--- The running server's native options; for the library's defaults
--- (false) those of the defaults, made now to be compared.
function H.running_options(core)
  local running = core.server_options()
  if running == false then
    return M.server_part(require("amp.config.defaults").resolved())
  end
  return running
end

-- `review.open_key` opens the next review (:Amp review); the key set by an
-- earlier setup() goes when it changes.
function H.map_review_key(config)
  local key = config.review.open_key
  if H.review_key == key then
    return
  end
  if H.review_key then
    pcall(vim.keymap.del, "n", H.review_key)
  end
  H.review_key = key or nil
  if key then
    vim.keymap.set("n", key, "<Cmd>Amp review<CR>", { desc = "amp: open the next review (:Amp review)" })
  end
end

-- OpenCtx runs whether or not the Amp server does; it is reconfigured only
-- when its options change.
function H.configure_openctx(config)
  if vim.deep_equal(H.openctx_opts, config.openctx) then
    return
  end
  H.openctx_opts = require("amp.config.defaults").copy(config.openctx)
  -- No provider and none running: nothing to start or stop, and the module
  -- is not even loaded.
  local idle = not config.openctx.enabled or vim.tbl_isempty(config.openctx.providers or {})
  if idle and not package.loaded["amp.openctx"] then
    return
  end
  local ok, err = require("amp.openctx").configure(config.openctx)
  if not ok then
    require("amp.core").fail(err, true)
  end
end

return M

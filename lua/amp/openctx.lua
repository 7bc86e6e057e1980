--- OpenCtx in Neovim: providers' annotations as virtual text, and their
--- mentions and items handed to the agent. The native library does the
--- calls (HTTP, the Node host, MCP servers) off the main thread; this module
--- decides when to ask and shows the answers.
local M = {}
local H = {}

local native = require("amp.native")

local AUGROUP = "AmpOpenCtx"
-- The annotations' extmarks (src/nvim/annotations.rs draws them).
local NAMESPACE = "amp_openctx"

H.config = nil ---@type table?
H.pending = {} ---@type table<integer, fun(result: table)>
H.next_id = 0
H.timers = {} ---@type table<integer, uv.uv_timer_t>
H.visible = true
H.provider_set = false

--- Links the highlight groups (a colorscheme may override them).
function M.highlights()
  vim.api.nvim_set_hl(0, "AmpAnnotation", { link = "Comment", default = true })
  vim.api.nvim_set_hl(0, "AmpAnnotationSeparator", { link = "NonText", default = true })
end

--- Starts (or restarts) the OpenCtx client with `config` (the `openctx` part
--- of the setup options). Returns true, or false and why.
---@param config table
function M.configure(config)
  H.config = config
  H.providers = {}
  M.stop()
  if not config.enabled or vim.tbl_isempty(config.providers or {}) then
    return true
  end
  M.highlights()
  local entries, skipped = H.encode_providers(config.providers)
  local _, resolver_err = native.call("openctx_set_resolver", M._resolve)
  if resolver_err then
    return false, "amp: OpenCtx: " .. resolver_err
  end
  local result, err = native.call("openctx_configure", {
    providers = entries,
    timeout_ms = config.timeout_ms,
    startup_timeout_ms = config.startup_timeout_ms,
    max_file_bytes = config.max_file_bytes,
    node_command = config.node_command,
    host_script = native.root() .. "/node/openctx-host.mjs",
    cache_dir = vim.fn.stdpath("cache") .. "/amp/openctx",
  })
  if err then
    return false, "amp: OpenCtx: " .. err
  end
  H.providers = type(result) == "table" and result.providers or {}
  -- A bad entry disables itself only (as in the reference client): one
  -- warning each, the others work.
  vim.list_extend(skipped, type(result) == "table" and result.skipped or {})
  for _, why in ipairs(skipped) do
    require("amp.notify").notify("amp: OpenCtx: provider skipped: " .. why, vim.log.levels.WARN)
  end
  local module = native.load()
  if type(module.openctx_on_win) ~= "function" then
    M.stop()
    return false, "amp: OpenCtx: the native library is out of date (no openctx_on_win): rebuild it"
  end
  H.set_decoration_provider(module.openctx_on_win)
  H.attach()
  -- Buffers already open get their annotations now.
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    M.refresh(vim.api.nvim_win_get_buf(win))
  end
  return true
end

--- One line (a message with newlines would open the hit-enter prompt).
function H.one_line(msg)
  return (tostring(msg):gsub("%s*\n%s*", " "))
end

--- Each provider entry as JSON text, encoded by vim.json.encode: that is how
--- the shape of an empty table is decided (Lua has one kind of table). Inside
--- a settings table an empty table is sent as a list, `[]` (`links = {}`),
--- `vim.empty_dict()` as an object, `{}`; the settings table itself is always
--- an object. Entries that cannot be encoded are skipped, with why.
---@return table<string, string> entries, string[] skipped
function H.encode_providers(providers)
  local entries, skipped = {}, {}
  for uri, entry in pairs(providers) do
    if type(uri) ~= "string" then
      table.insert(
        skipped,
        ("openctx.providers[%s]: the key must be a provider URI (a string)"):format(vim.inspect(uri))
      )
    else
      local ok, text = pcall(vim.json.encode, entry)
      if ok then
        entries[uri] = text
      else
        table.insert(
          skipped,
          ('openctx.providers["%s"]: cannot be sent to the provider (%s)'):format(uri, H.one_line(text))
        )
      end
    end
  end
  return entries, skipped
end

--- The providers in use (URIs), after skipping bad entries.
function M.providers()
  return H.providers or {}
end

--- Why OpenCtx cannot answer a command, or nil when it can.
function H.unavailable()
  -- (Never configured: setup() had no provider and did not load this module.)
  local config = H.config or require("amp").get_config().openctx
  if config.enabled == false then
    return "amp: OpenCtx is turned off (openctx.enabled = false)"
  end
  if #M.providers() == 0 or not M.enabled() then
    return "amp: add a provider to openctx.providers (:help amp-openctx): none is configured"
  end
end

function M.stop()
  pcall(vim.api.nvim_del_augroup_by_name, AUGROUP)
  H.set_decoration_provider(nil)
  for buf, timer in pairs(H.timers) do
    timer:stop()
    timer:close()
    H.timers[buf] = nil
  end
  if native.loaded() then
    native.call("openctx_stop")
  end
end

--- Whether the OpenCtx client is configured and running.
function M.enabled()
  return H.config ~= nil and H.config.enabled and native.loaded() and (native.call("openctx_running")) == true
end

--- Annotations are drawn as their lines come into view, as vim.lsp.inlay_hint
--- draws: Neovim calls `on_win` before it redraws a window, and the native
--- side sets the extmarks of the window's lines not drawn yet. nil removes
--- it (nothing to call on every redraw while OpenCtx is off).
function H.set_decoration_provider(on_win)
  if on_win == nil and not H.provider_set then
    return -- never set: do not create a provider only to empty it
  end
  vim.api.nvim_set_decoration_provider(vim.api.nvim_create_namespace(NAMESPACE), { on_win = on_win })
  H.provider_set = on_win ~= nil
end

function H.attach()
  local group = vim.api.nvim_create_augroup(AUGROUP, { clear = true })
  vim.api.nvim_create_autocmd({ "BufReadPost", "BufEnter", "BufWritePost" }, {
    group = group,
    desc = "amp: ask OpenCtx providers for annotations",
    callback = function(ev)
      M.refresh(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    group = group,
    desc = "amp: ask OpenCtx providers for annotations after edits (debounced)",
    callback = function(ev)
      H.debounced_refresh(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd({ "BufUnload", "BufWipeout" }, {
    group = group,
    desc = "amp: forget the annotations of a buffer that goes",
    callback = function(ev)
      local timer = H.timers[ev.buf]
      if timer then
        timer:stop()
        timer:close()
        H.timers[ev.buf] = nil
      end
      native.call("openctx_forget_buffer", ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = group,
    callback = function()
      M.stop()
    end,
  })
  vim.api.nvim_create_autocmd("ColorScheme", { group = group, callback = M.highlights })
end

--- Asks for the annotations of `buf` (0: current); the newest answer wins.
function M.refresh(buf)
  if not H.visible then
    return
  end
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  if require("amp.buffer").file_of(buf) then
    native.call("openctx_refresh_buffer", buf)
  end
end

function H.debounced_refresh(buf)
  local timer = H.timers[buf]
  if not timer then
    timer = assert(vim.uv.new_timer())
    H.timers[buf] = timer
  end
  timer:stop()
  timer:start(
    H.config and H.config.debounce_ms or 300,
    0,
    vim.schedule_wrap(function()
      M.refresh(buf)
    end)
  )
end

--- Forgets providers' meta and cached results, then asks again.
function M.reset()
  native.call("openctx_reset")
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    M.refresh(vim.api.nvim_win_get_buf(win))
  end
end

--- Shows or hides every annotation.
function M.toggle()
  H.visible = not H.visible
  native.call("openctx_set_visible", H.visible)
  if H.visible then
    M.reset()
  end
  require("amp.notify").notify("amp: annotations " .. (H.visible and "shown" or "hidden"), vim.log.levels.INFO)
end

--- The annotations drawn in `buf`, each with `provider`, `uri`, `range`, `item`.
---@return table[]
function M.annotations(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local ok, list = pcall(vim.api.nvim_buf_get_var, buf, "amp_openctx_annotations")
  if ok and type(list) == "string" then
    ok, list = pcall(vim.json.decode, list, { luanil = { object = true, array = true } })
  end
  return ok and type(list) == "table" and list or {}
end

local function lnum_of(annotation)
  local range = annotation.range
  return (type(range) == "table" and range.start and range.start.line or 0) + 1
end

--- The file's annotations in the quickfix list (and opens it).
function M.list()
  local buf = vim.api.nvim_get_current_buf()
  local items = {}
  for _, a in ipairs(M.annotations(buf)) do
    table.insert(items, {
      bufnr = buf,
      lnum = lnum_of(a),
      col = (tonumber(a.byte_col) or 0) + 1,
      text = (a.item and a.item.title or "?") .. (a.item and a.item.url and ("  " .. a.item.url) or ""),
    })
  end
  if #items == 0 then
    require("amp.notify").notify("amp: no annotations in this buffer", vim.log.levels.INFO)
    return false
  end
  vim.fn.setqflist({}, " ", { title = "OpenCtx annotations", items = items })
  vim.cmd("copen")
  return true
end

--- Annotations on the cursor's line.
function M.at_cursor()
  local line = vim.api.nvim_win_get_cursor(0)[1]
  return vim.tbl_filter(function(a)
    return lnum_of(a) == line
  end, M.annotations(0))
end

--- A floating window with the title, hover text and URL of the annotations
--- on the cursor's line.
function M.hover()
  local found = M.at_cursor()
  if #found == 0 then
    require("amp.notify").notify("amp: no annotation on this line", vim.log.levels.INFO)
    return nil
  end
  local lines = {}
  for i, a in ipairs(found) do
    if i > 1 then
      table.insert(lines, "---")
    end
    local item = a.item or {}
    table.insert(lines, "**" .. (item.title or "") .. "**")
    local hover = item.ui and item.ui.hover
    if hover and (hover.markdown or hover.text) then
      table.insert(lines, "")
      vim.list_extend(lines, vim.split(hover.markdown or hover.text, "\n"))
    end
    if item.url then
      table.insert(lines, "")
      table.insert(lines, item.url)
    end
  end
  local buf, win =
    vim.lsp.util.open_floating_preview(lines, "markdown", { border = "rounded", focus_id = "amp_openctx" })
  return buf, win
end

--- Opens the URL of the annotation on the cursor's line with vim.ui.open
--- (asks which one when there are several).
function M.open()
  local with_url = vim.tbl_filter(function(a)
    return a.item and a.item.url
  end, M.at_cursor())
  if #with_url == 0 then
    require("amp.notify").notify("amp: no annotation with a URL on this line", vim.log.levels.INFO)
    return false
  end
  local function go(a)
    if a then
      vim.ui.open(a.item.url)
    end
  end
  if #with_url == 1 then
    go(with_url[1])
  else
    vim.ui.select(with_url, {
      prompt = "Open",
      format_item = function(a)
        return a.item.title .. "  " .. a.item.url
      end,
    }, go)
  end
  return true
end

--- Called by the native side (the resolver it was given) with the answer
--- to request `id`.
function M._resolve(id, result)
  local callback = H.pending[id]
  H.pending[id] = nil
  if callback then
    callback(result or {})
  end
end

function H.request(fn, args, callback)
  H.next_id = H.next_id + 1
  local id = H.next_id
  H.pending[id] = callback
  table.insert(args, id)
  local _, err = native.call(fn, unpack(args))
  if err then
    H.pending[id] = nil
    require("amp.notify").notify("amp: " .. err, vim.log.levels.ERROR)
  end
end

local function report_failures(result)
  for _, f in ipairs(result.failures or {}) do
    require("amp.notify").notify(("amp: OpenCtx provider %s: %s"):format(f.provider, f.message), vim.log.levels.WARN)
  end
end

--- Where picked context goes: the agent's prompt, or a scratch buffer when
--- no agent is connected.
function M.deliver(text, title)
  if text == "" then
    require("amp.notify").notify("amp: the provider returned no content for the agent", vim.log.levels.WARN)
    return "none"
  end
  local status = require("amp").status()
  if status.running and (status.clients or 0) > 0 then
    require("amp.message").send_to_prompt(text)
    return "agent"
  end
  vim.cmd("botright new")
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "markdown"
  pcall(vim.api.nvim_buf_set_name, buf, "amp://context/" .. (title or "items"))
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, "\n"))
  return "scratch"
end

local function items_text(items)
  local parts = {}
  for _, item in ipairs(items) do
    local content = item.ai and item.ai.content
    if type(content) == "string" and content ~= "" then
      table.insert(parts, content)
    end
  end
  return table.concat(parts, "\n\n")
end

--- `:Amp mention [query]`: pick a mention from every provider that offers
--- them, fetch its items, hand their `ai.content` to the agent.
---@param query? string
---@param on_done? fun(where: string)
function M.mention(query, on_done)
  local why = H.unavailable()
  if why then
    vim.notify(why, vim.log.levels.WARN, { title = "amp" })
    return
  end
  -- The active document's URI goes with the query (MentionsParams.uri), as
  -- VS Code's client sends it.
  local path = require("amp.buffer").file_of(vim.api.nvim_get_current_buf()) or ""
  H.request("openctx_mentions", { query or "", path }, function(result)
    report_failures(result)
    local mentions = result.mentions or {}
    if #mentions == 0 then
      require("amp.notify").notify(
        "amp: no mentions" .. (query and query ~= "" and (" for '" .. query .. "'") or ""),
        vim.log.levels.INFO
      )
      return
    end
    vim.ui.select(mentions, {
      prompt = mentions[1].label or "OpenCtx mention",
      format_item = function(m)
        local d = m.mention.description
        return m.mention.title .. (d and d ~= "" and ("  — " .. d) or "")
      end,
    }, function(choice)
      if not choice then
        return
      end
      H.request("openctx_items_mention", { choice.provider, choice.mention }, function(res)
        if res.error then
          require("amp.notify").notify("amp: " .. res.error, vim.log.levels.WARN)
        end
        local where = M.deliver(items_text(res.items or {}), choice.mention.title)
        if on_done then
          on_done(where)
        end
      end)
    end)
  end)
end

--- `:Amp context {message}`: items from providers whose messageSelectors
--- match the message, handed to the agent.
function M.context(message, on_done)
  local why = H.unavailable()
  if why then
    vim.notify(why, vim.log.levels.WARN, { title = "amp" })
    return
  end
  H.request("openctx_items_message", { message }, function(result)
    report_failures(result)
    local items = vim.tbl_map(function(x)
      return x.item
    end, result.items or {})
    if #items == 0 then
      require("amp.notify").notify("amp: no provider has context for that message", vim.log.levels.INFO)
      if on_done then
        on_done("none")
      end
      return
    end
    local where = M.deliver(items_text(items), "message")
    if on_done then
      on_done(where)
    end
  end)
end

--- `:checkhealth amp`: asks every provider's `meta` afresh, off the main
--- thread; `callback(result)` gets `{providers = {{uri, kind, ok, name?,
--- features?, error?}}}`.
function M.check(callback)
  H.request("openctx_check", {}, callback)
end

return M

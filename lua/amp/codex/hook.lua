-- Codex CLI's PreToolUse hook for apply_patch, run by Codex as
-- `nvim --clean -l <plugin>/lua/amp/codex/hook.lua` (installed for one run by
-- `:Amp open codex`: src/codex/launch.rs). It hands the patch to the Neovim
-- that started Codex ($AMP_CODEX_HOOK_SOCKET, src/codex/server.rs), waits for
-- the user's review, and tells Codex the decision:
--
-- - exit 0, nothing on stdout: Codex applies its own patch (accepted as is);
-- - exit 0 with `permissionDecision = "allow"` and `updatedInput`: Codex
--   applies our patch instead (the user's tweak);
-- - exit 2, the reason on stderr: the patch is not applied, the model is told.
--
-- Codex lets a patch through when a hook fails (exit 1, a crash, a timeout),
-- so every error here exits 2, and this hook gives up (exit 2) before
-- Codex's own timeout of it would.
--
-- Frames on the socket: a u32 little-endian length, then the bytes. The
-- header (JSON, no patch), then, once Neovim answers `send`, the patch; then
-- one answer frame: { decision = "apply"|"rewrite"|"deny", patch?, reason? }.

local uv = vim.uv or vim.loop

-- Codex's hook input: the patch JSON-escaped, with a few fields around it.
local MAX_INPUT_BYTES = 64 * 1024 * 1024
-- Neovim's answers: a rewritten patch at most (src/codex/server.rs).
local MAX_ANSWER_BYTES = 64 * 1024 * 1024
-- Connecting to Neovim (a live one accepts at once).
local CONNECT_TIMEOUT_MS = 5000

local function deny(reason)
  uv.fs_write(2, ("amp: %s\n"):format(reason))
  os.exit(2)
end

local function read_input()
  local parts, size = {}, 0
  while true do
    local chunk = io.read(1024 * 1024)
    if not chunk then
      break
    end
    size = size + #chunk
    if size > MAX_INPUT_BYTES then
      deny(("Codex's hook input is over %d bytes; the patch was not applied"):format(MAX_INPUT_BYTES))
    end
    parts[#parts + 1] = chunk
  end
  local ok, input = pcall(vim.json.decode, table.concat(parts))
  if not ok or type(input) ~= "table" then
    deny("Codex's hook input is not JSON; the patch was not applied")
  end
  return input
end

local function u32(n)
  return string.char(n % 256, math.floor(n / 0x100) % 256, math.floor(n / 0x10000) % 256, math.floor(n / 0x1000000))
end

local function frame_length(bytes)
  local a, b, c, d = bytes:byte(1, 4)
  return a + b * 0x100 + c * 0x10000 + d * 0x1000000
end

local socket = os.getenv("AMP_CODEX_HOOK_SOCKET")
if not socket or socket == "" then
  deny("this Codex was not started by Neovim's :Amp open codex (no AMP_CODEX_HOOK_SOCKET); the patch was not applied")
end
local timeout_ms = tonumber(os.getenv("AMP_CODEX_HOOK_TIMEOUT_MS") or "") or 360000

local input = read_input()
if input.tool_name ~= nil and input.tool_name ~= "apply_patch" then
  os.exit(0) -- not a patch: not ours to review
end
local patch = type(input.tool_input) == "table" and input.tool_input.command
if type(patch) ~= "string" then
  deny("the apply_patch call has no patch text; it was not applied")
end

local pipe = uv.new_pipe(false)
local state = { buffer = "", frames = {}, connected = false, closed = false, err = nil }
pipe:connect(socket, function(err)
  if err then
    state.err = err
    return
  end
  state.connected = true
  pipe:read_start(function(read_err, data)
    if read_err or not data then
      state.closed, state.err = true, read_err
      return
    end
    state.buffer = state.buffer .. data
    while #state.buffer >= 4 do
      local n = frame_length(state.buffer)
      if n > MAX_ANSWER_BYTES then
        state.closed, state.err = true, ("an answer of %d bytes"):format(n)
        return
      end
      if #state.buffer < 4 + n then
        break
      end
      state.frames[#state.frames + 1] = state.buffer:sub(5, 4 + n)
      state.buffer = state.buffer:sub(5 + n)
    end
  end)
end)
vim.wait(CONNECT_TIMEOUT_MS, function()
  return state.connected or state.err ~= nil
end, 10)
if not state.connected then
  deny(("Neovim is gone (%s); the patch was not applied"):format(state.err or "no answer on its socket"))
end

local function send(bytes)
  pipe:write(u32(#bytes) .. bytes)
end

-- The next answer of Neovim, decoded; exits 2 when there is none in time.
local started = uv.now()
local function answer()
  local left = math.max(1, timeout_ms - (uv.now() - started))
  vim.wait(left, function()
    return #state.frames > 0 or state.closed
  end, 20)
  local frame = table.remove(state.frames, 1)
  if not frame then
    deny(
      state.closed and ("Neovim closed the review (%s); the patch was not applied"):format(state.err or "gone")
        or ("no decision from Neovim within %d s; the patch was not applied"):format(math.floor(timeout_ms / 1000))
    )
  end
  local ok, value = pcall(vim.json.decode, frame)
  if not ok or type(value) ~= "table" then
    deny("Neovim's answer is not JSON; the patch was not applied")
  end
  return value
end

local header = {
  cwd = type(input.cwd) == "string" and input.cwd or uv.cwd(),
  session_id = type(input.session_id) == "string" and input.session_id or nil,
  tool_name = "apply_patch",
  patch_bytes = #patch,
}
send(vim.json.encode(header))
local decision = answer()
if decision.decision == "send" then
  send(patch)
  decision = answer()
end

if decision.decision == "apply" then
  os.exit(0)
elseif decision.decision == "rewrite" and type(decision.patch) == "string" then
  io.write(vim.json.encode({
    hookSpecificOutput = {
      hookEventName = "PreToolUse",
      permissionDecision = "allow",
      updatedInput = { command = decision.patch },
    },
  }))
  io.flush()
  os.exit(0)
elseif decision.decision == "deny" then
  deny(type(decision.reason) == "string" and decision.reason or "Neovim denied the patch")
end
deny("Neovim's answer is not a decision; the patch was not applied")

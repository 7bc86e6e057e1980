-- :Amp is the plugin's only entry point at startup; everything else loads on demand.
if vim.g.loaded_amp then
  return
end
vim.g.loaded_amp = true
-- Before anything else: an older Neovim gets one line and no :Amp
-- (lua/amp/version.lua; the minimum is also written here, to load nothing
-- more at startup).
if vim.fn.has("nvim-0.10") == 0 then
  require("amp.version").check()
  return
end

vim.api.nvim_create_user_command("Amp", function(cmd)
  require("amp.commands").run(cmd)
end, {
  nargs = "*",
  range = true,
  bang = false,
  desc = "Amp editor server (:Amp <Tab> lists the subcommands)",
  complete = function(arglead, cmdline, cursorpos)
    return require("amp.commands").complete(arglead, cmdline, cursorpos)
  end,
})

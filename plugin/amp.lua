-- :Amp is the plugin's only entry point at startup; everything else loads on demand.
if vim.g.loaded_amp then
  return
end
vim.g.loaded_amp = true

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

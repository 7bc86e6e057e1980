--- `:Amp cli-plugin` (lua/amp/cli_plugin.lua): the Amp CLI plugin that gives
--- the agent Neovim's diagnostics.
local commands = require("amp.commands")

local CLI_PLUGIN_ACTIONS = { "install", "remove", "status" }

commands.register("cli-plugin", {
  desc = "the Amp CLI plugin that gives the agent Neovim's diagnostics: install, remove, status",
  complete = function(arglead)
    return commands.filter(CLI_PLUGIN_ACTIONS, arglead)
  end,
  run = function(args)
    local action = args.fargs[1] or "status"
    local plugin = require("amp.cli_plugin")
    if action == "status" then
      commands.info(plugin.describe())
    elseif action == "install" or action == "remove" then
      local ok, msg = plugin[action]()
      if ok then
        commands.info(msg)
      else
        commands.error(msg)
      end
    else
      commands.error(
        ("amp: use %s: there is no cli-plugin action '%s'"):format(table.concat(CLI_PLUGIN_ACTIONS, ", "), action)
      )
    end
  end,
})

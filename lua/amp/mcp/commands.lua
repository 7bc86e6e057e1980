--- `:Amp mcp` (lua/amp/mcp/): the MCP server entry for an agent's configuration.
local commands = require("amp.commands")

commands.register("mcp", {
  desc = "show the MCP server entry to add to an agent's configuration (JSON, TOML) in a scratch buffer",
  run = function()
    require("amp.mcp").show()
  end,
})

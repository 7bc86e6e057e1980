--- `:Amp open` (lua/amp/terminal.lua): an agent's CLI in a terminal.
local commands = require("amp.commands")

commands.register("open", {
  desc = "open (or hide, or show again) an agent's CLI in a terminal attached to this Neovim",
  complete = function(arglead, words)
    local terminal = require("amp.terminal")
    if #words <= 1 then
      return commands.filter(terminal.available(), arglead)
    end
    return commands.filter(terminal.suggested_args(words[2]), arglead)
  end,
  run = function(args)
    -- `:Amp open [agent] [args...]`; `:Amp open --continue` is the default agent's.
    local agent, extra = args.fargs[1], vim.list_slice(args.fargs, 2)
    if agent and agent:sub(1, 1) == "-" then
      agent, extra = nil, args.fargs
    end
    require("amp.terminal").toggle(agent, extra)
  end,
})

--- `:Amp tap` (lua/amp/tap.lua): the tap gateway's state, and pairing.
local commands = require("amp.commands")

commands.register("tap", {
  desc = "the tap gateway (Copilot CLI): its state, or pair with the code Copilot shows",
  complete = function(arglead, words)
    if #words <= 1 then
      return commands.filter({ "pair", "status" }, arglead)
    end
    return {}
  end,
  run = function(args)
    local sub = args.fargs[1] or "status"
    if sub == "pair" then
      require("amp.tap").pair(args.fargs[2])
    elseif sub == "status" then
      require("amp.notify").notify(require("amp.tap").state_line())
    else
      commands.error(("amp: tap: unknown subcommand %q (pair, status)"):format(sub))
    end
  end,
})

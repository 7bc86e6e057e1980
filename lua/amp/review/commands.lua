--- `:Amp review` (lua/amp/review/): agents' proposals and the changes they
--- made on disk, hunk by hunk.
local commands = require("amp.commands")

commands.register("review", {
  desc = "open an agent's proposal or review the changes agents made, hunk by hunk",
  run = function(args)
    require("amp.review").command(args.text)
  end,
  complete = function(arglead)
    return commands.filter(require("amp.review").complete(), arglead)
  end,
})

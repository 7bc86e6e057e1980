--- `:Amp diff`, `:Amp take`, `:Amp keep` (lua/amp/files.lua): a buffer whose
--- file changed on disk while it had unsaved changes: compare, take the
--- disk's text, or keep yours.
local commands = require("amp.commands")

commands.register("diff", {
  desc = "compare the buffer with the file on disk",
  run = function()
    commands.report(require("amp.files").diff())
  end,
})

commands.register("take", {
  desc = "replace the buffer with the file on disk",
  run = function()
    local mod, err = require("amp.native").load()
    if not mod then
      commands.error(err)
      return
    end
    commands.report(require("amp.files").take(mod))
  end,
})

commands.register("keep", {
  desc = "keep the buffer's text and write it over the file on disk",
  run = function()
    commands.report(require("amp.files").keep())
  end,
})

--- `:Amp annotations`, `:Amp mention`, `:Amp context` (lua/amp/openctx.lua):
--- OpenCtx annotations, mentions and context items.
local commands = require("amp.commands")

local ANNOTATION_ACTIONS = { "toggle", "refresh", "list", "hover", "open" }

commands.register("annotations", {
  desc = "OpenCtx annotations: toggle, refresh, list, hover, open",
  complete = function(arglead)
    return vim.tbl_filter(function(a)
      return vim.startswith(a, arglead)
    end, ANNOTATION_ACTIONS)
  end,
  run = function(args)
    local action = args.fargs[1] or "list"
    local openctx = require("amp.openctx")
    if action == "toggle" then
      openctx.toggle()
    elseif action == "refresh" then
      openctx.reset()
    elseif action == "list" then
      openctx.list()
    elseif action == "hover" then
      openctx.hover()
    elseif action == "open" then
      openctx.open()
    else
      commands.error(
        ("amp: use %s: there is no annotations action '%s'"):format(table.concat(ANNOTATION_ACTIONS, ", "), action)
      )
    end
  end,
})

commands.register("mention", {
  desc = "pick an OpenCtx mention and send its content to the agent",
  run = function(args)
    require("amp.openctx").mention(args.text ~= "" and args.text or nil)
  end,
})

commands.register("context", {
  desc = "send OpenCtx items matching a message to the agent",
  run = function(args)
    if args.text == "" then
      commands.error("amp: usage: :Amp context {message}")
      return
    end
    require("amp.openctx").context(args.text)
  end,
})

--- The one-line notices of proposals (|amp-review-proposal|): one arrived
--- (told where it is not typed over), some closed without the user.
local M = {}
local H = {}

local api = vim.api

--- "amp: Claude proposes a change to sub/x.env: :Amp review to open it",
--- on one line whatever the path's length (its start gives way). Typed
--- over in Insert and Command-line mode (the mode message, the command
--- line), so told when the user leaves them; several at once in one line.
function M.arrived(item)
  table.insert(H.unannounced, item)
  if H.typing() then
    if not H.waiting_to_announce then
      H.waiting_to_announce = true
      api.nvim_create_autocmd("ModeChanged", {
        group = api.nvim_create_augroup("amp_review_announce", { clear = true }),
        callback = function()
          if H.typing() then
            return
          end
          H.waiting_to_announce = false
          vim.schedule(H.announce_now)
          return true
        end,
      })
    end
    return
  end
  H.announce_now()
end

H.unannounced = {}

function H.typing()
  local mode = api.nvim_get_mode().mode
  return mode:find("^[iRc]") ~= nil
end

function H.announce_now()
  local items = vim.tbl_filter(function(item)
    return require("amp.review.proposal").items[item.key] == item and not item.review
  end, H.unannounced)
  H.unannounced = {}
  if #items == 0 then
    return
  end
  local open = require("amp.review.config").get().open_key or ":Amp review"
  if #items > 1 then
    local agents = {}
    for _, item in ipairs(items) do
      agents[item.agent] = true
    end
    local names = vim.tbl_keys(agents)
    table.sort(names)
    require("amp.notify").news(
      ("amp: %d proposals from %s: %s to open them"):format(#items, table.concat(names, ", "), open)
    )
    return
  end
  local item = items[1]
  local head = ("amp: %s proposes a change to "):format(item.agent)
  local tail = (": %s to open it"):format(open)
  local room = math.max(vim.v.echospace, 40) - vim.fn.strdisplaywidth(head .. tail)
  local rel = item.rel
  if vim.fn.strdisplaywidth(rel) > room and room > 8 then
    rel = "…" .. vim.fn.strcharpart(rel, vim.fn.strchars(rel) - room + 1)
  end
  require("amp.notify").news(head .. rel .. tail)
end

H.ENDS = {
  disconnected = "%s disconnected: ",
  timed_out = "%s's proposal timed out: ",
}

--- One line for the user about `items` of `agent` closed for `why`.
function M.closed(agent, items, why)
  local start = H.ENDS[why]
  if not start or #items == 0 then
    return
  end
  local what = #items == 1 and ("its proposal for %s was closed"):format(items[1].rel)
    or ("its %d proposals were closed"):format(#items)
  if why == "timed_out" then
    what = #items == 1 and ("%s closed"):format(items[1].rel) or what
  end
  require("amp.notify").notify("amp: " .. start:format(agent) .. what .. " (nothing written)", vim.log.levels.WARN)
end

return M

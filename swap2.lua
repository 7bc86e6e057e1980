local f = '/tmp/mb/sw.txt'
local buf = vim.fn.bufadd(f)
local ok, err = pcall(vim.fn.bufload, buf)
io.stderr:write('bufload ok=' .. tostring(ok) .. ' err=' .. tostring(err):sub(1,200) .. ' loaded=' .. tostring(vim.api.nvim_buf_is_loaded(buf)) .. ' lines=' .. vim.inspect(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) .. '\n')
vim.cmd('qa!')

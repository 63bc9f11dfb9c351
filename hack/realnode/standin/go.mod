module omenative.local/standin

go 1.24

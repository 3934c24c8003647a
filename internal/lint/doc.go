// Package lint holds repository-wide checks that run as tests: today, that
// package imports point down the layer stack (cmd -> mount -> fs -> lsm ->
// journal, blockcache) and never up.
package lint

"""The code of envhub-examples/word-guess: the game's rules, its responder and its verifier."""

from experiments.cli import main
from synth.cliutil import exit_main

if __name__ == "__main__":
    exit_main(main)

from synth.cli import main
from synth.cliutil import exit_main

exit_main(main)

"""The ``probe-train`` console script: Ctrl-C is turned into a flag before anything heavy is
imported (typer, torch), so a SIGINT while the program starts is read at a safe point and reported
in one line, never as a traceback out of an import."""


def main() -> None:
    from probe.errors import SIGINT

    with SIGINT.caught():
        from .cli import main as cli_main

        cli_main()

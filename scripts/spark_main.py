"""Main file for spark-submit (it needs a .py file): the `streaming-app` CLI."""

from streaming_app.cli.main import main

if __name__ == "__main__":
    main()

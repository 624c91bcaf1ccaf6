from sregym.cli.main import main

main()

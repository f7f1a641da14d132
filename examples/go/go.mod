module example.com/qlessd-worker

go 1.19

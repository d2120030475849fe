module github.com/websitebench/mailplane/pkg

go 1.26

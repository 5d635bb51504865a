#!/bin/sh
echo "hello from minimal: $(cat /opt/tools/hello)"
